"""The store keeps its own indexes true (sortedcontainers' habit): random actions, then ``_check``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dst.reference.store import Lease, Store


class Quiet:
    def __getattr__(self, name):
        return lambda *args: None


ops = st.lists(st.tuples(st.sampled_from(["put", "renew", "drop", "tick", "lose"]), st.integers(0, 9),
                         st.integers(1, 100)), max_size=80)


@settings(max_examples=200)
@given(ops, st.booleans())
def test_random_actions_keep_the_store_consistent(actions, durable):
    store = Store({"db": 3, "io": 2}, Quiet(), durable_leases=durable)
    now = 0
    for op, n, amount in actions:
        if op == "put":
            limit = "db" if n % 2 else "io"
            lease = Lease(store.new_lease_id(), f"c{n}", limit, 1 + n % 2, now + amount, store.next_fence(),
                          store.free_seat(limit, now))
            store.put_lease(lease)
        elif op == "renew" and (ids := store.lease_ids()):
            store.set_expiry(store.get_lease(ids[n % len(ids)]), now + amount)
        elif op == "drop" and (ids := store.lease_ids()):
            store.drop_lease(ids[n % len(ids)])
        elif op == "tick":
            now += amount
        elif op == "lose":
            store.lose_memory()
        for limit in ("db", "io"):
            expected = sum(store.get_lease(i).slots for i in store.lease_ids()
                           if store.get_lease(i).limit == limit and store.get_lease(i).expiry <= now)
            assert store.expired_slots(limit, now) == expected
        assert store.expired(now) == [i for _, i in sorted((store.get_lease(i).expiry, i) for i in store.lease_ids()
                                                          if store.get_lease(i).expiry <= now)]
        store._check()
