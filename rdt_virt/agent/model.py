# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The agent's view of the world: desired instances, actual resctrl state
and the actions that turn one into the other.

Desired state comes from libvirt (one :class:`Instance` per running domain
that Nova owns) and ``/proc`` (its :class:`Threads`); actual state is a
:class:`Snapshot` of resctrl. :func:`rdt_virt.agent.reconcile.plan` compares
them and returns actions; :mod:`rdt_virt.agent.executor` applies them. All
of these are plain values, so the reconciliation is tested as a table of
inputs and expected actions.
"""

import dataclasses
import typing

ROOT = None  # the default control group

# Values of BandwidthPolicy.group, as the driver writes them.
SHARED = 'shared'
INSTANCE = 'instance'
LIBVIRT = 'libvirt'


@dataclasses.dataclass(frozen=True)
class CacheRequest:
    """One ``<cache>`` of a ``<cachetune>``: bytes of one cache id."""

    level: int
    type: str       # 'both', 'code' or 'data'
    cache_id: int
    size: int       # bytes


@dataclasses.dataclass(frozen=True)
class Allocation:
    """A libvirt allocation: a ``<cachetune>`` and/or ``<memorytune>``.

    libvirt creates one resctrl group per allocation, named
    ``<machine name>-<id>``, and places the vCPUs listed in it.
    """

    group: str
    vcpus: typing.FrozenSet[int]
    caches: typing.Tuple[CacheRequest, ...] = ()
    # <memorytune> values: {memory bandwidth domain id: percent}.
    bandwidth: typing.Mapping[int, int] = dataclasses.field(
        default_factory=dict)
    monitor: bool = False


@dataclasses.dataclass(frozen=True)
class BandwidthPolicy:
    """The bandwidth part of the rdt-virt metadata element of a domain."""

    unit: str       # 'percent', 'MBps' or 'amd'
    value: int      # in the host's unit, already rounded by the driver
    requested: int
    group: str      # who applies it: SHARED, INSTANCE or LIBVIRT


@dataclasses.dataclass(frozen=True)
class Instance:
    """A running domain that Nova owns, as the agent must treat it."""

    uuid: str
    name: str
    domain_id: int
    allocations: typing.Tuple[Allocation, ...] = ()
    bandwidth: typing.Optional[BandwidthPolicy] = None
    monitor: bool = False
    # The policy as published (extra spec names to values), for readers.
    policy: typing.Mapping[str, typing.Any] = dataclasses.field(
        default_factory=dict)
    # hw:rdt_priority: 'high', 'normal' or 'low'.
    priority: str = 'normal'
    # The owning project's id (Nova's <nova:owner>), for telemetry only;
    # None when the domain does not say.
    project_id: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Threads:
    """The threads of an instance's QEMU process."""

    pid: int
    vcpus: typing.Mapping[int, int]           # vCPU index -> thread id
    others: typing.Tuple[int, ...] = ()       # emulator, I/O, workers

    @property
    def all(self):
        return frozenset(self.vcpus.values()) | frozenset(self.others)


@dataclasses.dataclass
class GroupState:
    """What the agent read of one control group."""

    name: typing.Optional[str]
    tasks: typing.FrozenSet[int] = frozenset()
    # Parsed schemata, or None when it was not read.
    schemata: typing.Optional[dict] = None
    # Monitoring groups read: {name: tasks}. Only those the agent needs.
    mon_groups: typing.Dict[str, typing.FrozenSet[int]] = dataclasses.field(
        default_factory=dict)
    # Names of every monitoring group, read or not.
    mon_names: typing.FrozenSet[str] = frozenset()


@dataclasses.dataclass
class Snapshot:
    """resctrl as the agent read it.

    ``complete`` snapshots list every control group, so that unused groups
    can be removed; the event fast path reads only the groups of one
    instance and never removes anything.
    """

    groups: typing.Dict[typing.Optional[str], GroupState]
    complete: bool = True

    def where(self):
        """``{tid: (control group, monitoring group or None)}``.

        Threads in no listed group are in the default group; they are not
        in the result because the default group's tasks are not read.
        """
        found = {}
        for name, group in self.groups.items():
            if name is ROOT:
                continue
            for tid in group.tasks:
                found[tid] = (name, None)
        for name, group in self.groups.items():
            for mon, tasks in group.mon_groups.items():
                for tid in tasks:
                    found[tid] = (name, mon)
        return found


# Actions ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class CreateGroup:
    """mkdir a control group; ``libvirt``: restore a libvirt group."""

    group: str
    libvirt: bool = False
    # The instance it serves, if only one (for counter generations).
    uuid: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class RemoveGroup:
    group: str


@dataclasses.dataclass(frozen=True)
class WriteSchemata:
    group: typing.Optional[str]
    text: str


@dataclasses.dataclass(frozen=True)
class AssignTasks:
    """Write thread ids to a control group's or monitoring group's tasks."""

    group: typing.Optional[str]
    mon_group: typing.Optional[str]
    tids: typing.Tuple[int, ...]
    uuid: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class CreateMonGroup:
    group: typing.Optional[str]
    mon_group: str
    uuid: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class RemoveMonGroup:
    group: typing.Optional[str]
    mon_group: str


@dataclasses.dataclass(frozen=True)
class MoveMonGroup:
    """Rename a monitoring group to another parent.

    Its threads follow it into the new control group and its counters
    survive. Kernels before 6.5 cannot rename: the executor then moves
    ``tids`` (the group's threads) to ``new_group`` and re-creates the
    monitoring group there, whose counters start again.
    """

    mon_group: str
    group: typing.Optional[str]
    new_group: typing.Optional[str]
    tids: typing.Tuple[int, ...] = ()
    uuid: typing.Optional[str] = None


@dataclasses.dataclass(frozen=True)
class AssignCounter:
    """Give (``'e'``) or take (``'_'``) the MBM counter of one event.

    Counter-assignment mode (``mbm_event``) only; on every domain.
    """

    group: typing.Optional[str]
    mon_group: typing.Optional[str]
    event: str
    state: str
    uuid: typing.Optional[str] = None


# Where an instance ended up --------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Placement:
    """Where the agent keeps an instance, and where its counters are.

    ``counters`` is ``(control group, monitoring group)`` of the RMID that
    counts exactly this instance, or None with ``reason``.
    """

    uuid: str
    group: typing.Optional[str]
    mon_group: typing.Optional[str] = None
    counters: typing.Optional[typing.Tuple[typing.Optional[str],
                                           typing.Optional[str]]] = None
    reason: typing.Optional[str] = None
    # True when the instance needs a monitoring group (RMID budget).
    wants_mon_group: bool = False
