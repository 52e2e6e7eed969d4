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


@pytest.mark.parametrize("sql, expected", [
    ("SET search_path TO public", "SET search_path TO dst_clock, pg_catalog, public"),
    ("set session search_path=a,b", "set session search_path= dst_clock, pg_catalog,a,b"),
    ("SET LOCAL search_path = 'x'", "SET LOCAL search_path = dst_clock, pg_catalog, 'x'"),
    ("SELECT 1; SET search_path TO s; SELECT now()", "SELECT 1; SET search_path TO dst_clock, pg_catalog, s; SELECT now()"),
    ("ALTER ROLE app SET search_path TO app", "ALTER ROLE app SET search_path TO dst_clock, pg_catalog, app"),
    ("SELECT set_config('search_path', 'public', false)",
     "SELECT set_config('search_path', 'dst_clock, pg_catalog, public', false)"),
    ("SELECT pg_catalog.set_config('search_path', '', false)",
     "SELECT pg_catalog.set_config('search_path', 'dst_clock, pg_catalog', false)"),
])
def test_a_search_path_a_session_sets_keeps_dsts_clock_first(sql, expected):
    assert virtual_time(sql) == expected
    assert virtual_time(expected) == expected  # not put in front twice


@pytest.mark.parametrize("sql", [
    "SET search_path TO DEFAULT", "set search_path = default", "RESET search_path", "SHOW search_path",
    "UPDATE t SET search_path = 'x'",  # a column of that name
    "SELECT set_config('search_path', $1, false)",  # not a literal: what the parameter holds is not seen here
    "SELECT 'SET search_path TO x'", "SET search_path_x TO y",
])
def test_statements_that_set_no_search_path_are_left_alone(sql):
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
