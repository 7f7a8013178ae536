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

"""The RMID budget and the rotation of monitoring groups. Pure.

Every control group holds an RMID and the kernel refuses to create one
without a free RMID, so monitoring groups may only use what control groups
can never need: ``num_rmids - num_closids`` (the default group's RMID is
one of the ``num_closids``), less the RMIDs of other tools' monitoring
groups. When more instances need a monitoring group than that, the agent
multiplexes: the *window* of instances that have one changes every
rotation interval, a quarter of the budget at a time, from those monitored
longest to those waiting longest. Handing over only part of the window
keeps most instances reporting through a rotation (a new group needs two
readings before it has a rate) and lets freed RMIDs leave limbo before
they are needed again.
"""


def rmid_budget(caps, configured=-1, foreign_mon_groups=0):
    """How many monitoring groups the agent may keep.

    :param caps: the host's HostCapabilities.
    :param configured: ``[rdt_agent] rmid_budget`` (-1: automatic).
    :param foreign_mon_groups: monitoring groups of libvirt and other tools.
    """
    if caps.monitor is None:
        return 0
    auto = caps.num_rmids - max(caps.num_closids, 1) - foreign_mon_groups
    auto = max(auto, 0)
    return auto if configured < 0 else min(configured, auto)


class Rotation(object):
    """Which instances get a monitoring group, over time.

    :param interval: seconds between two rotations.
    """

    def __init__(self, interval):
        self.interval = interval
        self.window = frozenset()
        self._since = {}        # uuid -> when it entered the window
        self._left = {}         # uuid -> when it last left it
        self._last_rotation = None
        self.candidates = 0

    @property
    def rotating(self):
        """True when instances outnumber the budget."""
        return self.candidates > len(self.window)

    @property
    def coverage(self):
        """Share of the candidates that have a monitoring group now."""
        if not self.candidates:
            return 1.0
        return len(self.window) / self.candidates

    def update(self, candidates, budget, now):
        """Return the new window for ``candidates`` under ``budget``.

        :param candidates: uuids that need a monitoring group.
        :param budget: monitoring groups allowed (see :func:`rmid_budget`).
        :param now: the current time (any monotonic clock, in seconds).
        """
        cands = set(candidates)
        self.candidates = len(cands)
        budget = max(int(budget), 0)
        if self._last_rotation is None:
            self._last_rotation = now
        window = {u for u in self.window if u in cands}
        for uuid in list(self._since):
            if uuid not in window:
                del self._since[uuid]
        for uuid in list(self._left):
            if uuid not in cands:
                del self._left[uuid]
        if len(cands) <= budget:
            window = cands
            self._last_rotation = now
        else:
            by_age = sorted(window, key=lambda u: (self._since[u], u))
            while len(window) > budget:
                self._leave(by_age.pop(0), window, now)
            if budget and now - self._last_rotation >= self.interval:
                step = min(len(cands) - budget, max(1, budget // 4))
                for uuid in by_age[:step]:
                    self._leave(uuid, window, now)
                self._last_rotation = now
            waiting = sorted(cands - window,
                             key=lambda u: (self._left.get(u, float('-inf')),
                                            u))
            for uuid in waiting[:budget - len(window)]:
                window.add(uuid)
        for uuid in window:
            self._since.setdefault(uuid, now)
        self.window = frozenset(window)
        return self.window

    def admit(self, uuid, budget, now):
        """Let a newly started instance in if the budget has room.

        The event fast path uses this instead of :meth:`update`, which
        needs every candidate of the host.
        """
        if uuid not in self.window and len(self.window) < max(budget, 0):
            self.window = self.window | {uuid}
            self._since[uuid] = now
            self.candidates += 1
        return self.window

    def forget(self, uuid):
        """An instance stopped: free its place in the window."""
        if uuid in self.window:
            self.window = self.window - {uuid}
            self.candidates = max(self.candidates - 1, 0)
        self._since.pop(uuid, None)
        self._left.pop(uuid, None)

    def _leave(self, uuid, window, now):
        window.discard(uuid)
        self._since.pop(uuid, None)
        self._left[uuid] = now
