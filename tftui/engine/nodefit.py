"""kube-scheduler's node filters that a GPU placement must also pass: NodeResourcesFit (CPU, memory,
pod count) and NodeAffinity (`nodeSelector`, required node affinity).

The TensorFusion scheduler is a plugin inside kube-scheduler, so a worker lands only on a node that
every filter passes: a free GPU on a node whose CPU is all requested cannot be used. The room on a
node is its Kubernetes Node's `status.allocatable` minus the requests of the pods bound to it
(`spec.nodeName`, not finished; terminating pods still hold theirs, as in kube-scheduler). A pod's
request is the sum over its containers, or the largest init container's when that is larger.

Missing data is never a decision: a resource the Node does not list in `allocatable` (or a GPUNode
without a Kubernetes Node) is not limited, so a dump without allocatable figures places exactly as
before. Pure functions over a `ClusterState`; `NodeFit` keeps bookings of a simulation apart from the
state's figures (computed once per state).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tftui.engine.state import ClusterState
from tftui.model.quantity import QuantityError, quantity_float
from tftui.model.selectors import selector_matches

# refusal reason codes, in the order they are checked
REASONS: Final = ("node-affinity", "pods", "cpu", "memory")
_ENDED: Final = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class PodRes:
    """What one pod asks of a node: milli-CPU, memory bytes, and its node constraints."""

    cpu: float = 0.0  # milli-CPU
    memory: float = 0.0  # bytes
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[Any, ...] = ()  # required nodeSelectorTerms (ORed), as in the pod spec

    def to_json(self) -> dict[str, float]:
        return {"cpu_milli": round(self.cpu, 3), "memory_bytes": round(self.memory)}


NO_POD = PodRes()


@functools.lru_cache(maxsize=1 << 14)
def _requests(raw: tuple[tuple[tuple[Any, Any], ...], tuple[tuple[Any, Any], ...]]) -> tuple[float, float]:
    """(milli-CPU, bytes) of containers' and init containers' raw requests (memoized: what-if
    states ask for the same few request shapes over and over)."""

    def q(value: Any, scale: float) -> float:
        if value in (None, ""):
            return 0.0
        try:
            return quantity_float(value) * scale
        except (QuantityError, TypeError, ValueError):
            return 0.0  # a bad quantity is a state warning elsewhere; it asks for nothing here

    containers, inits = raw
    cpu = sum(q(c, 1000.0) for c, _ in containers)
    mem = sum(q(m, 1.0) for _, m in containers)
    for c, m in inits:
        cpu = max(cpu, q(c, 1000.0))
        mem = max(mem, q(m, 1.0))
    return cpu, mem


# pod_requests by the identity of the spec parts it reads: a simulation asks it of every pod of a
# node on every state, and a pod's containers, selector and affinity are replaced, never edited,
# when the pod changes (the memo holds them, so an id is not reused while its entry lives)
_BY_SPEC: dict[int, tuple[object, object, object, object, object, PodRes]] = {}
_BY_SPEC_MAX: Final = 1 << 17


def pod_requests(pod: Mapping[str, Any]) -> PodRes:
    """The requests and node constraints of `pod` (a Pod object)."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return _pod_requests({})
    parts = (
        spec.get("containers"),
        spec.get("initContainers"),
        spec.get("nodeSelector"),
        spec.get("affinity"),
    )
    hit = _BY_SPEC.get(id(spec))
    if (
        hit is not None
        and hit[0] is spec
        and hit[1] is parts[0]
        and hit[2] is parts[1]
        and hit[3] is parts[2]
        and hit[4] is parts[3]
    ):
        return hit[5]
    got = _pod_requests(spec)
    if len(_BY_SPEC) >= _BY_SPEC_MAX:
        _BY_SPEC.clear()
    _BY_SPEC[id(spec)] = (spec, *parts, got)
    return got


def _pod_requests(spec: Mapping[str, Any]) -> PodRes:

    def raw(section: str) -> tuple[tuple[Any, Any], ...]:
        out = []
        for c in spec.get(section) or ():
            req = (c.get("resources") or {}).get("requests") or {}
            out.append((req.get("cpu"), req.get("memory")))
        return tuple(out)

    cpu, mem = _requests((raw("containers"), raw("initContainers")))
    selector = spec.get("nodeSelector") or {}
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or ()
    return PodRes(
        cpu,
        mem,
        tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        tuple(terms),
    )


@dataclass(frozen=True, slots=True)
class Room:
    """A node's allocatable and what its pods request; None: the Node does not say (unlimited)."""

    cpu: float | None
    memory: float | None
    pods: int | None
    cpu_requested: float
    memory_requested: float
    pod_count: int
    labels: Mapping[str, str]


def _allocatable(node_obj: Mapping[str, Any]) -> tuple[float | None, float | None, int | None]:
    alloc = (node_obj.get("status") or {}).get("allocatable") or {}

    def q(key: str, scale: float) -> float | None:
        value = alloc.get(key)
        if value in (None, ""):
            return None
        try:
            return quantity_float(value) * scale
        except (QuantityError, TypeError, ValueError):
            return None  # unreadable: not a limit (missing data is never a decision)

    pods = q("pods", 1.0)
    return q("cpu", 1000.0), q("memory", 1.0), None if pods is None else int(pods)


def rooms(state: ClusterState) -> dict[str, Room]:
    """Every GPUNode's room (computed once per state; read-only)."""
    return state.derived("nodefit-rooms", _rooms)


_EXACT: Final = float(1 << 50)  # a request at most this large, and whole, sums exactly in any order


@dataclass(slots=True)
class _Carry:
    """What the last `_rooms` counted, to derive the next state's rooms from the pods that changed.

    `pods` holds every pod of that snapshot by id (the dict itself keeps the id from being reused)
    with the node it counts on (None: it counts nowhere) and its requests as integers; `used` sums
    them per node; `rooms` is node → (its Node object, its room). Kept on the state it counts
    (holding no state: no reference cycle), never changed once kept."""

    pods: dict[int, tuple[Mapping[str, Any], str | None, int, int]]
    used: dict[str, tuple[int, int, int]]
    rooms: dict[str, tuple[object, Room]]


_CARRY: Final = "carried/nodefit-rooms"  # `_Carry`: `incremental.CARRIED` keeps it for the next states


def _counted(pod: Mapping[str, Any]) -> tuple[Any, int, int] | None:
    """(node it counts on or None, milli-CPU, bytes) as integers; None: a request that is not whole
    (or too large to sum exactly), which only the full pass in snapshot order adds up as before."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or ((pod.get("status") or {}).get("phase") or "Pending") in _ENDED:
        return None, 0, 0
    r = pod_requests(pod)
    cpu, mem = float(r.cpu), float(r.memory)  # an int when the pod has no containers
    if not (cpu.is_integer() and mem.is_integer() and abs(cpu) <= _EXACT and abs(mem) <= _EXACT):
        return None
    return node, int(cpu), int(mem)


def _rooms(state: ClusterState) -> dict[str, Room]:
    """The rooms of every node. A state derived incrementally (`engine.incremental`, which shares
    the dicts of unchanged objects and never changes one in place) starts from the last counts it
    carries (made on a state it derives from) and counts only the pods that are not the very same
    dicts; each node's sums are exact integers,
    so they equal the full pass's float sums in snapshot order (`_full`, used when a request is not
    a whole number)."""
    pods = state.snapshot.kind("Pod")
    last: _Carry | None = state._derived.get(_CARRY)  # the last counts, carried by `update_state`
    carry = _derive(last, pods) if last is not None else None
    if carry is None:
        carry = _fresh(pods)
    if carry is None:  # a request that is not whole: the sums in snapshot order, as always
        state._derived.pop(_CARRY, None)
        return _full(state)
    out: dict[str, Room] = {}
    kept: dict[str, tuple[object, Room]] = {}
    before = last.rooms if last is not None else {}
    zero = (0, 0, 0)
    for name, nv in state.nodes.items():
        cpu_req, mem_req, count = carry.used.get(name, zero)
        node_obj = nv.node_obj
        prev = before.get(name)
        room = prev[1] if prev is not None and prev[0] is node_obj else None
        if room is None or (room.cpu_requested, room.memory_requested, room.pod_count) != (
            cpu_req,
            mem_req,
            count,
        ):
            if node_obj is None:
                room = Room(None, None, None, float(cpu_req), float(mem_req), count, {})
            else:
                cpu, mem, npods = _allocatable(node_obj)
                labels = (node_obj.get("metadata") or {}).get("labels") or {}
                room = Room(cpu, mem, npods, float(cpu_req), float(mem_req), count, labels)
        out[name] = room
        kept[name] = (node_obj, room)
    carry.rooms = kept
    state._derived[_CARRY] = carry
    return out


def _fresh(pods: Iterable[Mapping[str, Any]]) -> _Carry | None:
    entries: dict[int, tuple[Mapping[str, Any], str | None, int, int]] = {}
    used: dict[str, tuple[int, int, int]] = {}
    for pod in pods:
        got = _counted(pod)
        if got is None:
            return None
        node, cpu, mem = got
        entries[id(pod)] = (pod, node, cpu, mem)
        if node is not None:
            c, m, n = used.get(node, (0, 0, 0))
            used[node] = (c + cpu, m + mem, n + 1)
    return _Carry(entries, used, {})


def _derive(last: _Carry, pods: list[dict[str, Any]]) -> _Carry | None:
    """`_fresh(pods)` from `last`, counting only the pods that are not the very same dicts; None
    when most of them changed (a fresh count is as cheap) or a request is not whole."""
    now = {id(p): p for p in pods}
    gone = last.pods.keys() - now.keys()
    new = now.keys() - last.pods.keys()
    if len(gone) + len(new) > len(now) // 2:
        return None
    entries = dict(last.pods)
    used = dict(last.used)
    for i in gone:
        _pod, node, cpu, mem = entries.pop(i)
        if node is not None:
            c, m, n = used[node]
            used[node] = (c - cpu, m - mem, n - 1)
    for i in new:
        pod = now[i]
        got = _counted(pod)
        if got is None:
            return None
        node, cpu, mem = got
        entries[i] = (pod, node, cpu, mem)
        if node is not None:
            c, m, n = used.get(node, (0, 0, 0))
            used[node] = (c + cpu, m + mem, n + 1)
    return _Carry(entries, used, {})


def _full(state: ClusterState) -> dict[str, Room]:
    """Every node's room summed in snapshot order (the reference the derived rooms equal)."""
    used: dict[str, list[float]] = {}
    for pod in state.snapshot.kind("Pod"):
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node not in state.nodes:
            continue
        if ((pod.get("status") or {}).get("phase") or "Pending") in _ENDED:
            continue
        r = pod_requests(pod)
        acc = used.setdefault(node, [0.0, 0.0, 0.0])
        acc[0] += r.cpu
        acc[1] += r.memory
        acc[2] += 1
    out: dict[str, Room] = {}
    for name, nv in state.nodes.items():
        cpu_req, mem_req, count = used.get(name, (0.0, 0.0, 0.0))
        if nv.node_obj is None:
            out[name] = Room(None, None, None, cpu_req, mem_req, int(count), {})
            continue
        cpu, mem, pods = _allocatable(nv.node_obj)
        labels = (nv.node_obj.get("metadata") or {}).get("labels") or {}
        out[name] = Room(cpu, mem, pods, cpu_req, mem_req, int(count), labels)
    return out


def affinity_ok(pod: PodRes, labels: Mapping[str, str]) -> bool:
    """NodeAffinity filter: every nodeSelector pair, and one of the required terms (if any)."""
    if any(labels.get(k) != v for k, v in pod.node_selector):
        return False
    if not pod.affinity:
        return True
    for term in pod.affinity:
        exprs = (term or {}).get("matchExpressions") or []
        if exprs and selector_matches({"matchExpressions": exprs}, labels, empty_matches_all=False):
            return True
    return False


@dataclass(slots=True)
class NodeFit:
    """The state's rooms plus what a simulation booked on top of them (or freed)."""

    rooms: Mapping[str, Room]
    booked: dict[str, list[float]] = field(default_factory=dict)  # node → [milli-CPU, bytes, pods]

    def copy(self) -> NodeFit:
        return NodeFit(self.rooms, {k: list(v) for k, v in self.booked.items()})

    def free(self, node: str) -> tuple[float | None, float | None, int | None]:
        """(milli-CPU, bytes, pods) still free on `node`; None: not limited."""
        room = self.rooms.get(node)
        if room is None:
            return None, None, None
        b = self.booked.get(node, (0.0, 0.0, 0.0))
        return (
            None if room.cpu is None else room.cpu - room.cpu_requested - b[0],
            None if room.memory is None else room.memory - room.memory_requested - b[1],
            None if room.pods is None else room.pods - room.pod_count - int(b[2]),
        )

    def refuse(self, node: str, pod: PodRes | None) -> str | None:
        """The reason code (`REASONS`) kube-scheduler would filter `node` out for `pod`, or None."""
        room = self.rooms.get(node)
        if room is None:
            return None
        pod = pod or NO_POD
        if (pod.node_selector or pod.affinity) and not affinity_ok(pod, room.labels):
            return "node-affinity"
        cpu, mem, pods = self.free(node)
        if pods is not None and pods < 1:
            return "pods"
        if cpu is not None and pod.cpu > cpu + 1e-9:
            return "cpu"
        if mem is not None and pod.memory > mem + 0.5:
            return "memory"
        return None

    def book(self, node: str, pod: PodRes | None, times: int = 1) -> None:
        """`pod` now runs on `node` (times −1: it left)."""
        pod = pod or NO_POD
        acc = self.booked.setdefault(node, [0.0, 0.0, 0.0])
        acc[0] += pod.cpu * times
        acc[1] += pod.memory * times
        acc[2] += times


def node_fit(state: ClusterState) -> NodeFit:
    """A fresh `NodeFit` over the state's rooms (nothing booked yet)."""
    return NodeFit(rooms(state))


def refusals(fit: NodeFit, nodes: Iterable[str], pod: PodRes | None) -> dict[str, str]:
    """node → reason code, for the nodes `pod` cannot go to."""
    out: dict[str, str] = {}
    for n in nodes:
        why = fit.refuse(n, pod)
        if why is not None:
            out[n] = why
    return out
