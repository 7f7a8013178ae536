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

"""The flow's boots and deletes in quick succession, counted by RDTFilter.

:func:`boots_and_deletes` takes the :class:`~rdt_virt.cloud.flow.Flow` on
an empty cloud. Its flavor, ``hw:mem_bw=10`` without Placement keys, is
not one an operator is advised to make (``rdt-virt flavor-audit`` says
so): with it no one but the scheduler's RDTFilter and the host's own
claim count CLOSIDs, which is what the step tests (admin/capacity).
Servers boot one at a time, each waited for, until the reference host's
free CLOSIDs are all taken: every one of them must go ACTIVE there, the
next one must be refused with RDTFilter's reason, and once they are
deleted a boot right away, before any periodic report, must be ACTIVE.
On the way, a live migration of one of them to the host without MBA is
refused with RDTFilter's reason, in the command's error and in the
migration's event.
"""

import json
import os
import time

from rdt_virt.cloud import flow_moves

FLAVOR = 'rdt.filter-only'
HOST = 'compute1'


def _boot(flow, name):
    """Boot ``name`` and wait for it: the server, ACTIVE or ERROR."""
    flow.os('server', 'create', '--flavor', FLAVOR, '--image', 'rdt-idle',
            '--nic', 'none', '--wait', name, '-c', 'name', '-c', 'status',
            check=False)
    return flow.wait(name + ' to end its build', lambda: flow._state(
        name, ('ACTIVE', 'ERROR')), timeout=180)


def _fault(flow, name):
    # By id (see Flow.bad_input).
    uuid = flow._show(name)['id']
    return json.dumps(flow.os('server', 'show', uuid, parse=True,
                              show=False).get('fault') or {})


def refused_live_migration(flow, name):
    """A live migration to the host without MBA says RDTFilter's reason.

    With a flavor without Placement keys RDTFilter refuses the requested
    host, and the operator reads why in the command's error and in the
    migration's event details (admin/troubleshooting).
    """
    reason = ('RDTFilter: no host can take hw:mem_bw=10: 1 host: the host '
              'has no memory bandwidth allocation (MBA)')
    rc, text = flow.os('server', 'migrate', '--live-migration', '--host',
                       'compute2', name, check=False)
    flow.expect(rc != 0 and reason in text,
                'a live migration of %s to compute2 is refused with the '
                'reason: %s' % (name, reason))
    events = flow.os('server', 'event', 'list', name, parse=True)
    request = [e['Request ID'] for e in events
               if e['Action'] == 'live-migration'][0]
    event = flow.os('server', 'event', 'show', name, request, parse=True,
                    show=False)
    details = [e.get('details') or '' for e in event['events']]
    flow.expect(any(reason in d for d in details),
                "the migration's event (%s) holds the reason in its details"
                % ', '.join(e['event'] for e in event['events']))
    flow.wait(name + ' ACTIVE', lambda: flow._settled(name))


def free_in_resctrl(flow, host):
    """Free CLOSIDs of ``host`` as its resctrl shows them.

    The smallest ``num_closids`` of its resources, less the default group
    and every other control group.
    """
    root = flow.cloud.host_dir(host, 'sandbox', 'resctrl')
    counts = []
    for resource in os.listdir(os.path.join(root, 'info')):
        path = os.path.join(root, 'info', resource, 'num_closids')
        if os.path.exists(path):
            with open(path) as f:
                counts.append(int(f.read()))
    groups = [name for name in os.listdir(root)
              if name not in ('info', 'mon_groups', 'mon_data') and
              os.path.isdir(os.path.join(root, name))]
    return min(counts) - 1 - len(groups)


def boots_and_deletes(flow):
    flow.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
            '--property', 'hw:mem_bw=10', FLAVOR)
    # What the host has, and the report the scheduler starts from: one
    # sent as a server left may still count what it held until the next
    # periodic report (admin/capacity).
    free = free_in_resctrl(flow, HOST)
    first = flow_moves.rdt_stat(flow, HOST).capacity.free_closids
    started = time.monotonic()
    flow.wait('%s to report its %d free CLOSIDs' % (HOST, free),
              lambda: flow_moves.rdt_stat(
                  flow, HOST).capacity.free_closids == free,
              timeout=120, interval=5)
    flow.expect(True, '%s has %d free CLOSIDs and reports them (%d when '
                'first read, %.0f s before)' % (
                    HOST, free, first, time.monotonic() - started))
    names = ['churn-%d' % i for i in range(1, free + 1)]
    for name in names:
        server = _boot(flow, name)
        flow.expect(server['status'] == 'ACTIVE' and
                    server['OS-EXT-SRV-ATTR:host'] == HOST,
                    '%s is ACTIVE on %s' % (name, HOST))
    flow.expect(len(flow_moves.groups(flow, HOST)) == free,
                '%s: %d servers, one resctrl group each, every free CLOSID '
                'taken' % (HOST, free))
    refused_live_migration(flow, names[0])
    over = 'churn-over'
    server = _boot(flow, over)
    fault = _fault(flow, over)
    flow.expect(server['status'] == 'ERROR' and
                'RDTFilter: no host can take hw:mem_bw=10' in fault and
                'no free CLOSID' in fault,
                'server %d is refused by RDTFilter, with the reason: %s' % (
                    free + 1, fault[:300]))
    flow.os('server', 'delete', '--wait', over, *names)
    # Right away: what the deleted servers held is free for the next boot,
    # without waiting for the periodic report.
    again = 'churn-again'
    server = _boot(flow, again)
    flow.expect(server['status'] == 'ACTIVE' and
                server['OS-EXT-SRV-ATTR:host'] == HOST,
                '%s, booted as soon as the others are deleted, is ACTIVE on '
                '%s' % (again, HOST))
    flow.os('server', 'delete', '--wait', again)
    flow.os('flavor', 'delete', FLAVOR)
