"""Seeded randomness in named, independent, keyed streams.

Every draw in a run comes from the run's seed through a :class:`Streams`
object that is passed in; nothing here reads the wall clock, the global
``random`` module, or Python's (salted) ``hash()``.

Two kinds of draw:

* ``Streams.sequence(name, *key)`` gives a ``random.Random`` for draws that
  form a sequence (the plan generator drawing one client's jobs).
* ``Streams.keyed(name)`` gives a :class:`Keyed` stream whose every draw is a
  pure function of ``(seed, name, key...)`` (splitmix64 over the key), so a
  message's latency depends on which message it is, not on how many draws came
  before it. Deleting a plan step therefore leaves the other steps' draws as
  they were (docs/findings.md: a finding replays exactly).
"""

from __future__ import annotations

import hashlib
import random

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_ODD = 0xD1B54A32D192ED03

# The names of the streams a run uses; a test pins them so a rename is deliberate.
STREAM_NAMES = ("workload", "faults", "network", "scheduling")


def derive(seed: int, *names: object) -> int:
    """A 64-bit integer from a seed and a path of names (ints and strings only)."""
    text = repr((int(seed), *names))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class Keyed:
    """Draws that are pure functions of a key: ``below(n, a, b)`` in ``[0, n)``."""

    __slots__ = ("_base",)

    def __init__(self, base: int) -> None:
        self._base = base

    def bits(self, a: int, b: int = 0) -> int:
        """64 random bits for the key ``(a, b)`` (non-negative ints); one splitmix64 finaliser, inlined."""
        z = self._base ^ ((a & _M64) * _GOLDEN & _M64) ^ (b * _ODD & _M64)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return z ^ (z >> 31)

    def below(self, n: int, a: int, b: int = 0) -> int:
        """A uniform-enough integer in ``[0, n)`` for ``n`` far below 2**64."""
        return self.bits(a, b) % n

    def chance(self, p: float, a: int, b: int = 0) -> bool:
        """True with probability ``p``."""
        return self.bits(a, b) < p * 18446744073709551616.0

    def between(self, lo: int, hi: int, a: int, b: int = 0) -> int:
        """An integer in ``[lo, hi]``."""
        return lo + self.bits(a, b) % (hi - lo + 1)


class Streams:
    """The named streams of one seed. A run that branches (:meth:`branch`) draws afresh from then on: every keyed
    stream handed out, and every one handed out later, is the branch's."""

    __slots__ = ("seed", "_keyed", "_draws")

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._keyed: list[Keyed] = []
        self._draws: tuple[int, ...] = ()  # the branches taken, in order

    def sequence(self, name: str, *key: object) -> random.Random:
        return random.Random(derive(self.seed, name, *key))

    def keyed(self, name: str, *key: object) -> Keyed:
        base = derive(self.seed, name, *key)
        for draw in self._draws:  # as if it had been handed out before the branches were taken
            base = derive(base, "branch", draw)
        stream = Keyed(base)
        self._keyed.append(stream)
        return stream

    def branch(self, draw: int) -> None:
        """From now on, every keyed stream draws as branch ``draw`` of this one: a pure function of the seed, the
        stream's name and the branches taken, so a branch's run is the same in any process, forked or not."""
        self._draws += (draw,)
        for stream in self._keyed:
            stream._base = derive(stream._base, "branch", draw)
