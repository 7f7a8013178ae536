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

"""RDTFilter: only hosts that can honour the flavor's RDT policy now.

Enable it in nova.conf of nova-scheduler::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_plugin.scheduler.filters.RDTFilter
    enabled_filters = ...,RDTFilter

A host passes when the driver's ``rdt_virt`` stat shows the features the
policy needs (L3 CAT, CDP, MBA in the right unit, monitoring) and the free
capacity for it right now (a CLOSID for a new control group, a contiguous
run of free ways on every cache domain, an RMID). Requests without RDT
extra specs pass every host without any work.

Stats are as old as the compute host's last resource update, so two boots
can still race for the last CLOSID; the compute host claims under a lock at
spawn and the loser is rescheduled to an alternate host. A flavor that
requests ``resources:CUSTOM_RDT_CLOSID`` has its CLOSID counted by Placement
atomically, so the filter leaves CLOSIDs out for it and checks the rest.

When it refuses every host of a single-instance request, the filter raises
NoValidHost itself, with a reason that names RDT, the flavor's RDT extra
specs and the hosts refused per cause ("2 hosts: ... need L3 CDP, ...;
1 host: no free CLOSID ..."): Nova's own reason ("There are not enough
hosts available.") tells the user nothing, and "every host is full" and
"no host has the feature" call for different fixes. The reason names no
host, as Nova's does not; the same counts are logged at INFO, and the
scheduler's debug log has each host's reason. A multi-create request keeps
Nova's reason, because Nova gives back the Placement allocations of the
request's instances already placed only when it raises NoValidHost itself
(a later move of one of its instances schedules that instance alone, and
gets the RDT reason).
Counting costs nothing per host: only when no host passed are the hosts'
verdicts, cached by then, looked up again and counted.
"""

import collections
import logging as std_logging

from nova import exception
from nova.scheduler import filters
from nova.scheduler import utils
from oslo_log import log as logging

from nova_plugin.scheduler import state
from rdt_virt.policy import extra_specs
from rdt_virt.policy import placement

LOG = logging.getLogger(__name__)


def _asked(request):
    specs = getattr(request.flavor, 'extra_specs', None) or {}
    return ', '.join('%s=%s' % (k, specs[k]) for k in sorted(specs)
                     if k in extra_specs.BY_KEY)


def is_move(spec_obj):
    """True if ``spec_obj`` moves an existing instance.

    Nova's conductor restricts every move (cold and live migration,
    resize, evacuation, unshelve) to the instance's cell by setting
    ``requested_destination.cell``; a boot never sets it.
    """
    dest = (spec_obj.requested_destination
            if spec_obj.obj_attr_is_set('requested_destination') else None)
    return dest is not None and dest.obj_attr_is_set('cell')


def _no_valid_host(spec_obj, hosts, reason):
    """NoValidHost naming RDT, for a single-instance request; else None.

    A move schedules its one instance, although its RequestSpec keeps the
    ``num_instances`` of the multi-create request that booted it.
    """
    if not hosts:
        return None
    if ((getattr(spec_obj, 'num_instances', 1) or 1) > 1 and
            not is_move(spec_obj)):
        return None
    return exception.NoValidHost(reason='RDTFilter: %s.' % reason)


def summary(verdicts):
    """``'2 hosts: <cause>; 1 host: <cause>'``, most frequent cause first."""
    counts = collections.Counter(v.cause for v in verdicts)
    return '; '.join('%d host%s: %s' % (n, '' if n == 1 else 's', cause)
                     for cause, n in sorted(counts.items(),
                                            key=lambda kv: (-kv[1], kv[0])))


def _note_placement_shortfall(request, spec_obj, passed):
    """Log at INFO a multi-create request Placement cannot hold whole.

    Its CLOSIDs are Placement's to count: the filter passes the hosts, and
    Nova fails the request with "There are not enough hosts available."
    when Placement refuses an instance's allocation (a WARNING of
    Placement's 409 from nova-scheduler's report client). This line says
    it in RDT's terms, from the free CLOSIDs the passing hosts reported.
    """
    count = getattr(spec_obj, 'num_instances', 1) or 1
    if count < 2:
        return
    each = state.placement_closids(
        getattr(request.flavor, 'extra_specs', None) or {})
    free = 0
    for host_state in passed:
        rdt = state.host_view(host_state).rdt
        free += rdt.capacity.free_closids if rdt is not None else 0
    if free >= count * each:
        return
    LOG.info('Instance %(uuid)s: %(count)d instances request '
             '%(rc)s=%(each)d each, and the %(hosts)d host(s) that pass '
             'RDTFilter report %(free)d free CLOSID(s): Placement will refuse '
             'the allocations beyond them and Nova fail the request with '
             '"There are not enough hosts available."',
             {'uuid': spec_obj.instance_uuid
              if spec_obj.obj_attr_is_set('instance_uuid') else '-',
              'count': count, 'rc': placement.RESOURCE_CLASS,
              'each': each, 'hosts': len(passed), 'free': free})


class RDTFilter(filters.BaseHostFilter):
    """Filter out hosts that lack the RDT capability or capacity."""

    # Rebuild keeps the host and its allocation.
    RUN_ON_REBUILD = False

    def filter_all(self, filter_obj_list, spec_obj):
        """The hosts of ``filter_obj_list`` that pass, for one request.

        Overrides Nova's per-host loop so that the request is looked at
        once, not once per host: a request without RDT extra specs returns
        the hosts untouched.
        """
        request = state.request_view(spec_obj)
        if request.policy is None or (not self.RUN_ON_REBUILD and
                                      utils.request_is_rebuild(spec_obj)):
            return filter_obj_list
        if request.error is not None:
            LOG.info('No host passes RDTFilter: %s', request.error)
            error = _no_valid_host(spec_obj, filter_obj_list, '%s (%s)' % (
                request.error, _asked(request)))
            if error is not None:
                raise error
            return []
        debug = LOG.isEnabledFor(std_logging.DEBUG)
        verdict = state.verdict
        passed = []
        for host_state in filter_obj_list:
            reason = verdict(host_state, request).reason
            if reason is None:
                passed.append(host_state)
            elif debug:
                LOG.debug('%(host)s fails RDTFilter: %(reason)s',
                          {'host': host_state, 'reason': reason})
        if passed and request.placement and not request.noted:
            request.noted = True
            _note_placement_shortfall(request, spec_obj, passed)
        if not passed and filter_obj_list:
            # Every host refused: their verdicts again, from the cache
            # (the loop above stays as cheap per host as it was).
            why = 'no host can take %s: %s' % (_asked(request), summary(
                verdict(host_state, request)
                for host_state in filter_obj_list))
            LOG.info('Instance %(uuid)s: %(why)s',
                     {'uuid': spec_obj.instance_uuid
                      if spec_obj.obj_attr_is_set('instance_uuid') else '-',
                      'why': why})
            error = _no_valid_host(spec_obj, filter_obj_list, why)
            if error is not None:
                raise error
        return passed

    def host_passes(self, host_state, spec_obj):
        """True if ``host_state`` can serve the RDT policy of ``spec_obj``."""
        request = state.request_view(spec_obj)
        if request.policy is None:
            return True
        if request.error is not None:
            LOG.debug('%(host)s fails RDTFilter: %(reason)s',
                      {'host': host_state, 'reason': request.error})
            return False
        reason = state.verdict(host_state, request).reason
        if reason is None:
            return True
        LOG.debug('%(host)s fails RDTFilter: %(reason)s',
                  {'host': host_state, 'reason': reason})
        return False
