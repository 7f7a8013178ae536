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
changed them (see :meth:`SnapshotReader.mon_tasks`).
"""

import zlib

from oslo_log import log as logging

from rdt_virt.agent import model
from rdt_virt.agent import reconcile
from rdt_virt import exception

LOG = logging.getLogger(__name__)
# Every monitoring group's tasks are read at least once in this many ticks.
MON_VERIFY_TICKS = 10


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
        tasks = frozenset(self.resctrl.read_tasks(group, mon))
        self._mon_cache[key] = (ctrl_tasks, tasks)
        return tasks

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
            return rc.read_schemata(name)
        try:
            return rc.read_schemata(name)
        except exception.GroupNotFound:
            raise
        except (exception.ResctrlError, exception.InvalidSchemata) as e:
            LOG.debug('Ignoring the schemata of group %s: %s', name, e)
            return None

    def _read_group(self, name, monitor, wanted, only, tick):
        rc = self.resctrl
        tasks = frozenset(rc.read_tasks(name))
        last = self._ctrl_tasks.get(name)
        if last is not None and last == tasks:
            # The same set as last time, as the same object: each of the
            # group's monitoring groups then checks it by identity
            # (mon_tasks) instead of comparing it element by element.
            tasks = last
        self._ctrl_tasks[name] = tasks
        group = model.GroupState(name, tasks=tasks,
                                 schemata=self.schemata(name))
        if monitor and (rc.owns(name) or reconcile.is_libvirt_group(name)):
            mons = rc.list_mon_groups(name)
            group.mon_names = frozenset(mons)
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
        root = model.GroupState(None, schemata=rc.read_schemata(None))
        if monitor:
            mons = rc.list_mon_groups(None)
            root.mon_names = frozenset(mons)
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
