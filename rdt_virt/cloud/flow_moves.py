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

"""The flow's moves to another host that copy disks: cold migration, resize.

:func:`cold_migration_and_resize` takes the
:class:`~rdt_virt.cloud.flow.Flow` on an empty cloud. A server with a
cache allocation (``rdt.protected``) boots on compute2, is cold-migrated
to compute1 and confirmed, then resized to ``rdt.protected4m`` with
compute1's service disabled, so that the scheduler sends it to compute2,
and reverted. Nova's libvirt driver copies the disk over SSH for both
(:mod:`rdt_virt.cloud.ssh`). While a move waits for confirmation and
after each, on both hosts: the resctrl groups (one, holding the vCPU,
where the server runs; none on the other host, whose domain is off), the
server's Placement allocations and each host's CLOSID usage (the
migration holds the old host's until confirmation), and the RDT stat of
the host the server left, which must give its CLOSID back at once.
"""

import json
import os

from rdt_virt.policy import hoststats

SERVER = 'mover'
FLAVOR, BIGGER = 'rdt.protected', 'rdt.protected4m'
HOSTS = ('compute1', 'compute2')


def rdt_stat(flow, host):
    """The RDT stat ``host`` last sent, as the scheduler reads it."""
    import sqlalchemy
    engine = sqlalchemy.create_engine(
        flow.cloud.layout.db_url('nova_cell1'))
    try:
        with engine.connect() as conn:
            row = conn.execute(sqlalchemy.text(
                'SELECT stats FROM compute_nodes WHERE host = :host AND '
                'deleted = 0'), {'host': host}).first()
    finally:
        engine.dispose()
    return hoststats.decode(json.loads(row[0]))


def groups(flow, host):
    """{libvirt resctrl group: threads in it} on ``host``."""
    root = flow.cloud.host_dir(host, 'sandbox', 'resctrl')
    found = {}
    for name in os.listdir(root):
        if name.startswith('qemu-'):
            with open(os.path.join(root, name, 'tasks')) as f:
                found[name] = len(f.read().split())
    return found


def providers(flow):
    """{resource provider UUID: name}."""
    return {rp['uuid']: rp['name'] for rp in flow.os(
        'resource', 'provider', 'list', parse=True, show=False)}


def allocations(flow, names, consumer):
    """{provider name: CLOSIDs} of a consumer (a server or a migration).

    ``names``: {provider UUID: name}.
    """
    found = flow.os('resource', 'provider', 'allocation', 'show', consumer,
                    parse=True, show=False) or []
    return {names.get(a['resource_provider']): a['resources'].get(
        'CUSTOM_RDT_CLOSID', 0) for a in found}


def check(flow, names, uuid, on, migration=None):
    """The server runs on ``on``; groups and Placement agree on both hosts.

    ``migration``: the UUID of a move waiting for confirmation, whose
    allocation holds the other host's CLOSID meanwhile.
    """
    other = [h for h in HOSTS if h != on][0]
    here, there = groups(flow, on), groups(flow, other)
    flow.expect(len(here) == 1 and all(n >= 1 for n in here.values()) and
                not there,
                '%s: one resctrl group on %s, with its vCPU thread; none on '
                '%s' % (SERVER, on, other))
    flow.expect(allocations(flow, names, uuid) == {on: 1},
                "%s's allocation, its CLOSID included, is on %s alone" % (
                    SERVER, on))
    usages = flow._usages()
    held = {on: 1, other: 1 if migration else 0}
    flow.expect(all(usages[h].get('CUSTOM_RDT_CLOSID') == n
                    for h, n in held.items()),
                'Placement counts a CLOSID on %s' % (
                    '%s and, for the migration, on %s' % (on, other)
                    if migration else '%s, none on %s' % (on, other)))
    if migration:
        flow.expect(allocations(flow, names, migration) == {other: 1},
                    "the migration's allocation holds %s's CLOSID until "
                    "it is confirmed or reverted" % other)


def given_back(flow, host, free):
    """``host``'s RDT stat gives every CLOSID back: ``free`` again."""
    flow.wait('%s to report its CLOSIDs free' % host,
              lambda: rdt_stat(flow, host).capacity.free_closids == free,
              timeout=60, interval=3)
    flow.expect(True, "%s's RDT stat has its %d free CLOSIDs back, without "
                "waiting for the periodic report" % (host, free))


def _migration(flow, name, kind):
    """The UUID of the server's newest migration of ``kind``."""
    moves = [m for m in flow._migrations(name) if m['Type'] == kind]
    return moves[0]['UUID'] if moves else None


def cold_migration_and_resize(flow):
    free = {h: rdt_stat(flow, h).capacity.free_closids for h in HOSTS}
    flow.os('server', 'create', '--flavor', FLAVOR, '--image', 'rdt-idle',
            '--nic', 'none', '--availability-zone', 'nova:compute2',
            '--wait', SERVER, '-c', 'name', '-c', 'status')
    server = flow._show(SERVER)
    uuid = server['id']
    flow.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute2',
                '%s is ACTIVE on compute2' % SERVER)
    names = providers(flow)
    check(flow, names, uuid, 'compute2')

    # Cold migration to a named host, then confirm.
    flow.os('server', 'migrate', '--host', 'compute1', '--wait', SERVER)
    server = flow.wait(SERVER + ' VERIFY_RESIZE', lambda: flow._state(
        SERVER, ('VERIFY_RESIZE',)))
    flow.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute1',
                '%s is cold-migrated to compute1, its disk copied over SSH'
                % SERVER)
    check(flow, names, uuid, 'compute1',
          _migration(flow, SERVER, 'migration'))
    flow.os('server', 'resize', 'confirm', SERVER)
    flow.wait(SERVER + ' ACTIVE', lambda: flow._settled(SERVER))
    check(flow, names, uuid, 'compute1')
    given_back(flow, 'compute2', free['compute2'])

    # A resize that the scheduler sends to the other host, then revert.
    flow.os('compute', 'service', 'set', '--disable', 'compute1',
            'nova-compute')
    try:
        flow.os('server', 'resize', '--flavor', BIGGER, '--wait', SERVER)
        server = flow.wait(SERVER + ' VERIFY_RESIZE', lambda: flow._state(
            SERVER, ('VERIFY_RESIZE',)))
    finally:
        flow.os('compute', 'service', 'set', '--enable', 'compute1',
                'nova-compute')
    flow.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute2' and
                server['flavor']['name'] == BIGGER,
                '%s is resized to %s on compute2 (compute1 disabled)' % (
                    SERVER, BIGGER))
    check(flow, names, uuid, 'compute2', _migration(flow, SERVER, 'resize'))
    flow.os('server', 'resize', 'revert', SERVER)
    server = flow.wait(SERVER + ' ACTIVE', lambda: flow._settled(SERVER))
    flow.expect(server['OS-EXT-SRV-ATTR:host'] == 'compute1' and
                server['flavor']['name'] == FLAVOR,
                '%s is reverted: %s on compute1' % (SERVER, FLAVOR))
    check(flow, names, uuid, 'compute1')
    given_back(flow, 'compute2', free['compute2'])
    flow.table('server', 'migration', 'list', '--server', SERVER, '-c',
               'Source Compute', '-c', 'Dest Compute', '-c', 'Status',
               '-c', 'Type')

    flow.os('server', 'delete', '--wait', SERVER)
    flow.wait('no group left', lambda: not any(groups(flow, h)
                                               for h in HOSTS), timeout=60)
    # The wait of ``server delete --wait`` ends once the server reads
    # DELETED, before its compute host gives its allocation back.
    flow.wait('the CLOSID to leave Placement', lambda: all(
        u.get('CUSTOM_RDT_CLOSID', 0) == 0
        for u in flow._usages().values()), timeout=30, interval=1)
    flow.expect(True, 'no CLOSID used in Placement after the delete')
