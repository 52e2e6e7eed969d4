"""SQL's clock keywords (CURRENT_TIMESTAMP and kin) are rewritten to call dst's clock, and nothing else is."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dst.aio.stores.postgres.clockwords import virtual_time


@pytest.mark.parametrize("sql, expected", [
    ("SELECT CURRENT_TIMESTAMP", 'SELECT dst_clock."current_timestamp"()'),
    ("select current_timestamp(3), localtime, current_date",
     'select dst_clock."current_timestamp"(3), dst_clock."localtime"(), dst_clock."current_date"()'),
    ("SELECT LocalTimestamp (0)", 'SELECT dst_clock."localtimestamp" (0)'),
    ("SELECT current_time,current_timestamp", 'SELECT dst_clock."current_time"(),dst_clock."current_timestamp"()'),
    ("CREATE TABLE t (at timestamptz DEFAULT CURRENT_TIMESTAMP NOT NULL)",
     'CREATE TABLE t (at timestamptz DEFAULT dst_clock."current_timestamp"() NOT NULL)'),
    ("SELECT current_date(1)", 'SELECT dst_clock."current_date"()(1)'),  # no precision: the server says so
])
def test_each_clock_keyword_becomes_a_call_of_dsts_clock(sql, expected):
    assert virtual_time(sql) == expected


@pytest.mark.parametrize("sql", [
    "SELECT 'CURRENT_TIMESTAMP', 'it''s current_date'",
    r"SELECT E'it\'s current_date', e'\\' || 'current_time'",
    'SELECT "current_time", "a""current_date" FROM t',
    "SELECT 1 -- current_timestamp\n",
    "/* a /* current_date */ b current_time */ SELECT 1",
    "SELECT $$ current_time $$, $x$ localtime $$ current_date $x$, $1",
    "SELECT t.current_date, 1 AS current_date, 2 as localtime",
    "SELECT current_user, current_setting('a'), localtimestamp_x, my_current_date, now()",
])
def test_keywords_in_strings_identifiers_comments_and_other_words_are_left_alone(sql):
    assert virtual_time(sql) == sql


words = st.sampled_from(["SELECT", "current_timestamp", "'current_date'", '"localtime"', "-- current_time\n",
                         "/* current_date */", "$$localtime$$", "1", ",", "(", ")", "now()", "x.current_date"])


@given(st.lists(words, max_size=12))
def test_text_outside_the_keywords_is_kept_byte_for_byte(parts):
    sql = " ".join(parts)
    out = virtual_time(sql)
    # the parts are joined by spaces, so a "()" right after the name is the one the rewrite added
    assert re.sub(r'dst_clock\."current_timestamp"(\(\))?', "current_timestamp", out) == sql
    assert virtual_time(out) == out  # a rewritten text is not rewritten again
