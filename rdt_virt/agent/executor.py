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

"""Apply reconciliation actions through the privileged entrypoints.

The executor is thin on purpose: it maps each action to one call of
:mod:`rdt_virt.privsep.resctrl`, counts the writes, and turns the kernel's
refusals into outcomes the service understands. Running out of CLOSIDs or
RMIDs (ENOSPC) and RMIDs still in limbo (EBUSY) are warnings: the group is
*blocked* for ``[rdt_agent] retry_interval`` and the instance keeps running
as it is. When an action fails, the later actions that depend on its group
are skipped rather than failing one by one. :attr:`Executor.failures`
counts the refusals by error code over the agent's life (the Prometheus
endpoint's ``rdt_virt_agent_write_failures_total``); the log has each
one with the kernel's ``last_cmd_status``.

Kernels before 6.5 cannot move a monitoring group to another control group
(rename answers EPERM). The executor finds out by trying, as distributions
backport: the first refusal makes it move the threads to their new control
group and re-create the monitoring group there, and it does so directly
from then on. The threads never pass through the default group.
"""

import collections
import dataclasses
import typing

from oslo_log import log as logging

from rdt_virt.agent import model
from rdt_virt.privsep import resctrl as priv

LOG = logging.getLogger(__name__)

REASONS = {
    (model.CreateGroup, priv.E_NOSPACE): 'no free CLOSID or RMID',
    (model.CreateGroup, priv.E_BUSY): 'RMIDs busy in limbo',
    (model.CreateMonGroup, priv.E_NOSPACE): 'no free RMID',
    (model.CreateMonGroup, priv.E_BUSY): 'RMIDs busy in limbo',
}
# The refusals counted from the start, at 0, so that a scraper sees the
# first one as an increase. A group someone else made first (E_EXISTS) and
# a rename the kernel cannot do (E_NORENAME) are handled, not failures.
COUNTED = tuple(c for c in priv.ERRORS
                if c not in (priv.E_EXISTS, priv.E_NORENAME))


@dataclasses.dataclass
class Outcome:
    """What applying a list of actions did."""

    writes: int = 0
    # Groups and monitoring groups created: (group, mon_group or None).
    created: typing.List[tuple] = dataclasses.field(default_factory=list)
    # Names refused for lack of CLOSIDs/RMIDs: {name: reason}.
    blocked: typing.Dict[str, str] = dataclasses.field(default_factory=dict)
    failures: typing.List[tuple] = dataclasses.field(default_factory=list)
    # Out of RMIDs when creating a monitoring group (lower the budget).
    rmids_exhausted: bool = False
    # Monitoring group creations refused with EBUSY (RMIDs in limbo).
    rmids_busy: int = 0
    not_mounted: bool = False
    # Threads moved into a control group: {tid: group}.
    moved: typing.Dict[int, typing.Any] = dataclasses.field(
        default_factory=dict)


def log_repairs(repairs, outcome):
    """Log, at INFO, each thread put back into its group.

    :param repairs: the plan's ``repairs``.
    :param outcome: the :class:`Outcome` of applying that plan; only moves
        that happened are logged.
    """
    for repair in repairs:
        if outcome.moved.get(repair.tid, False) != repair.group:
            continue
        LOG.info('Thread %(tid)d of instance %(uuid)s was in %(found)s: '
                 'put back into %(group)s',
                 {'tid': repair.tid, 'uuid': repair.uuid,
                  'found': repair.found or 'the default group',
                  'group': repair.group or 'the default group'})


def _target(action):
    """(group, mon_group) an action needs to exist, for skipping."""
    if isinstance(action, (model.WriteSchemata, model.RemoveGroup)):
        return [(action.group, None)]
    if isinstance(action, (model.AssignTasks, model.AssignCounter)):
        return [(action.group, None), (action.group, action.mon_group)]
    if isinstance(action, (model.CreateMonGroup, model.RemoveMonGroup)):
        return [(action.group, None)]
    if isinstance(action, model.MoveMonGroup):
        return [(action.new_group, None)]
    return []


class Executor(object):
    """Applies actions with the privileged API (a module or a fake)."""

    def __init__(self, api=priv):
        self.api = api
        # Whether the kernel can rename monitoring groups: None until a
        # rename was tried.
        self.can_rename = None
        # {error code: refusals} since the agent started.
        self.failures = collections.Counter(dict.fromkeys(COUNTED, 0))

    def _call(self, action):
        api = self.api
        if isinstance(action, model.CreateGroup):
            return api.create_group(action.group), 1
        if isinstance(action, model.RemoveGroup):
            return api.remove_group(action.group), 1
        if isinstance(action, model.WriteSchemata):
            return api.write_schemata(action.group, action.text), 1
        if isinstance(action, model.AssignTasks):
            return (api.assign_tasks(action.group, action.mon_group,
                                     list(action.tids)), len(action.tids))
        if isinstance(action, model.CreateMonGroup):
            return api.create_mon_group(action.group, action.mon_group), 1
        if isinstance(action, model.RemoveMonGroup):
            return api.remove_mon_group(action.group, action.mon_group), 1
        if isinstance(action, model.MoveMonGroup):
            return api.move_mon_group(action.mon_group, action.group,
                                      action.new_group), 1
        if isinstance(action, model.AssignCounter):
            return api.assign_counter(action.group, action.mon_group,
                                      action.event, action.state), 1
        raise TypeError('unknown action %r' % (action,))

    def apply(self, actions):
        """Apply ``actions`` in order; return an :class:`Outcome`."""
        out = Outcome()
        broken = set()
        for action in actions:
            if any(t in broken for t in _target(action)):
                LOG.debug('Skipping %s: an earlier step failed', action)
                continue
            if isinstance(action, model.MoveMonGroup) and (
                    self.can_rename is False):
                self._recreate(action, out, broken)
                continue
            result, writes = self._call(action)
            out.writes += writes
            if result.get('ok'):
                if isinstance(action, model.MoveMonGroup):
                    self.can_rename = True
                self._done(action, result, out)
                continue
            if result.get('error') == priv.E_EXISTS and isinstance(
                    action, (model.CreateGroup, model.CreateMonGroup)):
                # Someone (libvirt, a concurrent event) made it first.
                continue
            if result.get('error') == priv.E_NORENAME and isinstance(
                    action, model.MoveMonGroup):
                if self.can_rename is None:
                    LOG.info('This kernel cannot move monitoring groups '
                             '(%s); re-creating them instead',
                             result.get('message'))
                self.can_rename = False
                self._recreate(action, out, broken)
                continue
            self._failed(action, result, out, broken)
        return out

    def _step(self, action, out, broken):
        """Apply one action of a composite step; True when it worked."""
        result, writes = self._call(action)
        out.writes += writes
        if result.get('ok') or (
                result.get('error') == priv.E_EXISTS and
                isinstance(action, model.CreateMonGroup)):
            self._done(action, result, out)
            return True
        self._failed(action, result, out, broken)
        return False

    def _recreate(self, action, out, broken):
        """Move a monitoring group without rename.

        The threads go to the new control group first (so they are
        throttled as they should be and never fall back to the default
        group), then into a new monitoring group there; the old one, empty
        by then, is removed. The new group's counters start from zero,
        which the rate tracker sees as a new source.
        """
        old, new, mon = action.group, action.new_group, action.mon_group
        tids = tuple(action.tids)
        if tids and not self._step(model.AssignTasks(new, None, tids),
                                   out, broken):
            # The threads stay where they are: keep their old groups.
            broken.add((old, None))
            broken.add((new, mon))
            return
        created = self._step(model.CreateMonGroup(new, mon, action.uuid),
                             out, broken)
        if created and tids:
            self._step(model.AssignTasks(new, mon, tids, action.uuid), out,
                       broken)
        self._step(model.RemoveMonGroup(old, mon), out, broken)

    @staticmethod
    def _done(action, result, out):
        if isinstance(action, model.CreateGroup):
            out.created.append((action.group, None))
            LOG.info('Created resctrl group %s', action.group)
        elif isinstance(action, model.CreateMonGroup):
            out.created.append((action.group, action.mon_group))
            LOG.info('Created monitoring group %s in %s', action.mon_group,
                     action.group or 'the default group')
        elif isinstance(action, model.RemoveGroup):
            LOG.info('Removed resctrl group %s', action.group)
        elif isinstance(action, model.RemoveMonGroup):
            LOG.info('Removed monitoring group %s', action.mon_group)
        elif isinstance(action, model.MoveMonGroup):
            LOG.info('Moved monitoring group %s to %s', action.mon_group,
                     action.new_group or 'the default group')
        elif isinstance(action, model.WriteSchemata):
            LOG.info('Wrote schemata of %s: %s',
                     action.group or 'the default group',
                     action.text.strip().replace('\n', ' '))
        elif isinstance(action, model.AssignCounter):
            LOG.debug('%s the %s counter of %s/%s',
                      'Assigned' if action.state == 'e' else 'Released',
                      action.event, action.group, action.mon_group)
        elif isinstance(action, model.AssignTasks):
            if action.mon_group is None:
                for tid in result.get('moved') or ():
                    out.moved[tid] = action.group
            if result.get('gone'):
                LOG.debug('Threads %s exited before they could move',
                          result['gone'])
            LOG.debug('Moved threads %s to %s/%s', result.get('moved'),
                      action.group, action.mon_group)

    def _failed(self, action, result, out, broken):
        code, message = result.get('error'), result.get('message')
        out.failures.append((action, code, message))
        self.failures[code or 'unknown'] += 1
        reason = REASONS.get((type(action), code))
        if code == priv.E_NOTMOUNTED:
            out.not_mounted = True
        if isinstance(action, (model.CreateGroup, model.CreateMonGroup)):
            name = getattr(action, 'mon_group', None) or action.group
            if isinstance(action, model.CreateMonGroup):
                broken.add((action.group, action.mon_group))
            else:
                broken.add((action.group, None))
            if reason:
                out.blocked[name] = reason
                if isinstance(action, model.CreateMonGroup) and (
                        code == priv.E_NOSPACE):
                    out.rmids_exhausted = True
                if code == priv.E_BUSY:
                    out.rmids_busy += 1
                LOG.warning('Cannot create %s now (%s); retrying later: %s',
                            name, reason, message)
                return
        elif isinstance(action, model.MoveMonGroup):
            broken.add((action.group, action.mon_group))
        LOG.warning('resctrl refused %s: %s', action, message)
