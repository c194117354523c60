"""`engine.memo.ByIdentity`: a value per very same object, never per equal one."""

from __future__ import annotations

from tftui.engine.memo import ByIdentity


def test_computes_once_per_object_and_again_for_an_equal_copy() -> None:
    calls: list[object] = []

    def size(d: dict[str, int]) -> int:
        calls.append(d)
        return len(d)

    memo = ByIdentity(size, limit=8)
    a = {"x": 1}
    assert memo(a) == 1 and memo(a) == 1
    assert calls == [a]
    b = dict(a)  # equal, not the same: a state's changed object is a new dict
    assert memo(b) == 1
    assert len(calls) == 2 and calls[1] is b


def test_an_entry_holds_its_object_so_its_id_is_not_taken_by_another() -> None:
    memo: ByIdentity[list[int], int] = ByIdentity(sum, limit=8)
    ids = set()
    for n in range(5):
        obj = [n]
        ids.add(id(obj))
        assert memo(obj) == n  # a freed list's id reused by the next one would answer the old sum
    assert len(ids) == 5


def test_it_is_emptied_at_its_bound() -> None:
    calls: list[tuple[int]] = []

    def first(t: tuple[int]) -> int:
        calls.append(t)
        return t[0]

    memo = ByIdentity(first, limit=2)
    kept = [(1,), (2,), (3,)]
    for t in kept:
        memo(t)
    memo(kept[2])  # the third entry came after the bound emptied the memo: still kept
    memo(kept[0])  # gone with the bound: computed again
    assert calls == [kept[0], kept[1], kept[2], kept[0]]
