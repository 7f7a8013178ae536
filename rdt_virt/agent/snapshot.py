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


"""Reading resctrl into a :class:`~rdt_virt.agent.model.Snapshot`.

A tick plans from what resctrl holds: every control group's tasks and
schemata, and the agent's monitoring groups. Reading every monitoring
group's tasks on every tick would cost one read per instance on a
converged host, so their tasks are cached while nothing could have
changed them (see :meth:`SnapshotReader.mon_tasks`). What a file or a
listing held is parsed again only when its text changes
(:class:`Unchanged`): the same tasks or monitoring group names then come
as the same set object, and comparing them later (by the cache here, by
the planner's memo) is an identity test.
"""

import zlib

from oslo_log import log as logging

from rdt_virt.agent import model
from rdt_virt.agent import reconcile
from rdt_virt import exception
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import schemata as schemata_mod

LOG = logging.getLogger(__name__)
# Every monitoring group's tasks are read at least once in this many ticks.
MON_VERIFY_TICKS = 10


class Unchanged(object):
    """The value parsed from each file, parsed again when its text changes.

    :param parse: text -> value. Values are shared from read to read, so
        they must not be changed (frozensets), or be copied by the caller.
    """

    def __init__(self, parse):
        self._parse = parse
        self._last = {}         # key -> (text, value)

    def get(self, key, text):
        """The value of *text*, read from what *key* names."""
        last = self._last.get(key)
        if last is None or last[0] != text:
            if len(self._last) >= 65536:
                self._last.clear()
            last = self._last[key] = (text, self._parse(text))
        return last[1]


def _task_set(text):
    return frozenset(fs.parse_tasks(text))


class SnapshotReader(object):
    """Reads resctrl for the planner, caching monitoring groups' tasks.

    :param resctrl: a :class:`~rdt_virt.resctrl.fs.Resctrl`.
    :param prefix: the agent's group prefix.
    """

    def __init__(self, resctrl, prefix):
        self.resctrl = resctrl
        self.prefix = prefix
        # (group, mon group) -> (parent's tasks, tasks) at the last read.
        self._mon_cache = {}
        # group -> its tasks at the last read.
        self._ctrl_tasks = {}
        # monitoring group name -> its verification tick (see _slot).
        self._slots = {}
        # Parsed again only when the text changes: tasks by (group, mon
        # group), schemata by group, the mon_groups listing by group.
        self._tasks = Unchanged(_task_set)
        self._schemata = Unchanged(schemata_mod.parse)
        self._mon_names = Unchanged(frozenset)

    def invalidate(self):
        """Forget cached tasks: something was written."""
        self._mon_cache.clear()
        self._ctrl_tasks.clear()

    def mon_tasks(self, group, mon, ctrl_tasks, wanted, tick):
        """Tasks of a monitoring group, from the cache when that is safe.

        A converged tick should not read every monitoring group: their
        threads are known from the last read as long as nothing was
        written since, the parent's tasks did not change (a thread came
        or went) and the group belongs to a live instance (a dead thread
        in a cached set must not keep an unused group alive). Each group
        is still read every MON_VERIFY_TICKS ticks, which catches a
        thread moved straight from it to its parent.
        """
        key = (group, mon)
        cached = self._mon_cache.get(key)
        if cached is not None and mon in wanted and (
                cached[0] is ctrl_tasks or cached[0] == ctrl_tasks) and (
                self._slot(mon) != tick % MON_VERIFY_TICKS):
            return cached[1]
        tasks = self.read_tasks(group, mon)
        self._mon_cache[key] = (ctrl_tasks, tasks)
        return tasks

    def read_tasks(self, group, mon=None):
        """The thread ids of a tasks file, as a frozenset."""
        return self._tasks.get((group, mon),
                               self.resctrl.read_tasks_text(group, mon))

    def read_schemata(self, group):
        """A group's parsed schemata (a copy: the planner's own)."""
        parsed = self._schemata.get(
            group, self.resctrl.read_schemata_text(group))
        return {res: dict(doms) for res, doms in parsed.items()}

    def list_mon_groups(self, group):
        """``(sorted names, frozenset of them)`` of a group's mon groups."""
        mons = self.resctrl.list_mon_groups(group)
        return mons, self._mon_names.get(group, mons)

    def _slot(self, mon):
        """The tick (modulo MON_VERIFY_TICKS) that re-reads *mon*."""
        slot = self._slots.get(mon)
        if slot is None:
            if len(self._slots) >= 65536:
                self._slots.clear()
            slot = self._slots[mon] = (zlib.crc32(mon.encode()) %
                                       MON_VERIFY_TICKS)
        return slot

    def schemata(self, name):
        """A group's schemata; None for another tool's unreadable one.

        A pseudo-locked group answers ENODEV when its cache domain is
        offline; nothing of another tool's may stop a tick.
        """
        rc = self.resctrl
        if rc.owns(name) or reconcile.is_libvirt_group(name):
            return self.read_schemata(name)
        try:
            return self.read_schemata(name)
        except exception.GroupNotFound:
            raise
        except (exception.ResctrlError, exception.InvalidSchemata) as e:
            LOG.debug('Ignoring the schemata of group %s: %s', name, e)
            return None

    def _read_group(self, name, monitor, wanted, only, tick):
        rc = self.resctrl
        tasks = self.read_tasks(name)
        last = self._ctrl_tasks.get(name)
        if last is not None and (last is tasks or last == tasks):
            # The same set as last time, as the same object: each of the
            # group's monitoring groups then checks it by identity
            # (mon_tasks) instead of comparing it element by element.
            tasks = last
        self._ctrl_tasks[name] = tasks
        group = model.GroupState(name, tasks=tasks,
                                 schemata=self.schemata(name))
        if monitor and (rc.owns(name) or reconcile.is_libvirt_group(name)):
            mons, group.mon_names = self.list_mon_groups(name)
            group.mon_groups = {m: self.mon_tasks(name, m, group.tasks,
                                                  wanted, tick)
                                for m in mons if only is None or m in only}
        return group

    def read(self, caps, tick, scope=None, instances=(), only=None):
        """Read resctrl; ``scope``: only these control groups.

        :param caps: the host's capabilities.
        :param tick: the number of the tick (spreads cache checks).
        :param instances: uuids of the live instances, whose monitoring
            groups may come from the cache.
        :param only: names of the monitoring groups whose tasks to read
            (None: all); the others are only listed. For the fast path,
            which plans one instance.
        """
        rc = self.resctrl
        monitor = caps.monitor is not None
        wanted = {self.prefix + 'm-' + u for u in instances}
        root = model.GroupState(None, schemata=self.read_schemata(None))
        if monitor:
            mons, root.mon_names = self.list_mon_groups(None)
            # The default group's own tasks are never read (every thread
            # of the host): its cache entries depend on nothing else.
            root.mon_groups = {m: self.mon_tasks(None, m, None, wanted,
                                                 tick)
                               for m in mons if rc.owns(m) and (
                                   only is None or m in only)}
        groups = {None: root}
        names = rc.list_groups() if scope is None else sorted(
            n for n in scope if n is not None)
        for name in names:
            try:
                groups[name] = self._read_group(name, monitor, wanted,
                                                only, tick)
            except exception.GroupNotFound:
                continue
        return model.Snapshot(groups, complete=scope is None)
