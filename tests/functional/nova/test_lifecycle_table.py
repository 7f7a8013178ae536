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

"""Every lifecycle path of an RDT instance, on a host with one CLOSID to
spare and on a full one.

An instance with a throttled flavor (one CLOSID) boots on ``a``; ``b`` has
one CLOSID free for moves. After each path, on both hosts: the claims are
exactly those of the instances living there (the source of a resize
awaiting confirmation included), the free CLOSIDs reported are the tree's
minus one per claim (nothing leaked, nothing counted twice), libvirt's
groups are those of the running domains, and the instance is in the state
an operator expects.

Host ``a`` going down (evacuation, local delete) ends with ``a`` started
again, as an operator brings a host back: the post-checks then see what it
did with the instance it still ran.
"""

from nova import context as nova_context

from tests.functional.nova import base

MB10 = {'hw:mem_bw': '10'}
MB20 = {'hw:mem_bw': '20'}
# Domains that run, so libvirt holds their groups.
RUNNING = ('ACTIVE', 'PAUSED', 'VERIFY_RESIZE', 'RESCUE')


def _pause(test, server):
    test.api.post_server_action(server['id'], {'pause': None})
    test._wait_for_state_change(server, 'PAUSED')
    test.check(server, 'PAUSED')
    test.api.post_server_action(server['id'], {'unpause': None})
    return test._wait_for_state_change(server, 'ACTIVE')


def _suspend(test, server):
    server = test._suspend_server(server)
    test.check(server, 'SUSPENDED')
    return test._resume_server(server)


def _stop_start(test, server):
    server = test._stop_server(server)
    test.check(server, 'SHUTOFF')
    return test._start_server(server)


def _resize(test, server, confirm):
    server = test._resize_server(server, test.flavor(MB20))
    test.check(server, 'VERIFY_RESIZE', source='a')
    if confirm:
        return test._confirm_resize(server)
    return test._revert_resize(server)


def _migrate(test, server):
    server = test._migrate_server(server)
    test.check(server, 'VERIFY_RESIZE', source='a')
    return test._confirm_resize(server)


def _shelve(test, server):
    server = test._shelve_server(server)
    test.check(server, 'SHELVED_OFFLOADED')
    return test._unshelve_server(server)


def _rescue(test, server):
    test.allow_rescue()
    server = test._rescue_server(server)
    test.check(server, 'RESCUE')
    return test._unrescue_server(server)


def _live_migrate(test, server):
    test.live_migrations_complete()
    return test.live_migrate_to(server, 'b')


def _live_migrate_failed(test, server):
    test.live_migrations_complete(fail=True)
    test.api.post_server_action(server['id'], {'os-migrateLive': {
        'host': 'b', 'block_migration': 'auto'}})
    test._wait_for_migration_status(server, ['failed', 'error'])
    return test._wait_for_server_parameter(
        server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None,
                 'OS-EXT-SRV-ATTR:host': 'a'})


def _host_down(test, name):
    service = test.admin_api.get_services(host=name,
                                          binary='nova-compute')[0]
    test.computes[name].stop()
    test.admin_api.put_service(service['id'], {'forced_down': 'true'})
    return service['id']


def _host_up(test, name, service_id):
    test.restart_rdt_compute(name)
    test.admin_api.put_service(service_id, {'forced_down': 'false'})


def _evacuate(test, server):
    service_id = _host_down(test, 'a')
    # Since microversion 2.95 an evacuated instance arrives stopped.
    server = test._evacuate_server(server, expected_host='b')
    # a comes back and destroys what was evacuated from it.
    _host_up(test, 'a', service_id)
    test.check(server, 'SHUTOFF')
    return test._start_server(server)


def _local_delete(test, server):
    service_id = _host_down(test, 'a')
    # The API deletes an instance of a host that is down by itself.
    test._delete_server(server)
    _host_up(test, 'a', service_id)
    # a still runs the domain, with its resctrl groups, until its periodic
    # task reaps running deleted instances.
    test.assertEqual(1, len(test.libvirt_groups('a')))
    manager = test.computes['a'].manager
    manager._cleanup_running_deleted_instances(
        nova_context.get_admin_context())
    return None


def _delete(test, server):
    test._delete_server(server)
    test._wait_until_deleted(server)
    return None


PATHS = {
    'boot': lambda test, server: server,
    'soft_reboot': lambda test, server: test._reboot_server(server),
    'hard_reboot': lambda test, server: test._reboot_server(server,
                                                            hard=True),
    'stop_start': _stop_start,
    'pause': _pause,
    'suspend': _suspend,
    'rebuild': lambda test, server: test._rebuild_server(
        server, server['image']['id']),
    'resize_confirm': lambda test, server: _resize(test, server, True),
    'resize_revert': lambda test, server: _resize(test, server, False),
    'cold_migration': _migrate,
    'shelve_offload_unshelve': _shelve,
    'compute_restart': lambda test, server: (
        test.restart_rdt_compute('a') and server),
    'delete': _delete,
    'rescue': _rescue,
    'evacuate': _evacuate,
    'live_migration': _live_migrate,
    'live_migration_failed': _live_migrate_failed,
    'local_delete': _local_delete,
}


class RDTLifecycleTableTest(base.RDTServersTestBase):

    spare = None

    def setUp(self):
        super().setUp()
        self.start_rdt_compute('plain', variant='none')
        # The instance takes one CLOSID on a.
        self.free = {'a': self.spare + 1, 'b': 1}
        self.start_rdt_compute('a', prepare=base.leave_closids(
            self.free['a']))
        self.start_rdt_compute('b', prepare=base.leave_closids(
            self.free['b']))

    def check(self, server, status, source=None):
        """The invariants, with ``server`` in ``status`` (None: gone)."""
        host = None
        if server is not None:
            server = self.api.get_server(server['id'])
            self.assertEqual(status, server['status'])
            host = server['OS-EXT-SRV-ATTR:host']
        for name in ('a', 'b'):
            expected = set()
            if server is not None and name in (host, source):
                expected.add(server['id'])
            self.assertEqual(expected, set(self.claims(name)), name)
            self.assertEqual(self.free[name] - len(expected),
                             self.free_closids(name), name)
            running = int(server is not None and host == name and
                          status in RUNNING)
            self.assertEqual(running, len(self.libvirt_groups(name)), name)

    def run_path(self, path):
        server = self.boot(self.flavor(MB10), host='a')
        self.check(server, 'ACTIVE')
        server = PATHS[path](self, server)
        self.check(server, 'ACTIVE' if server is not None else None)


def _make(path):
    return lambda self: self.run_path(path)


class OneToSpare(RDTLifecycleTableTest):
    spare = 1


class NoneToSpare(RDTLifecycleTableTest):
    spare = 0


for _path in PATHS:
    for _cls in (OneToSpare, NoneToSpare):
        setattr(_cls, 'test_' + _path, _make(_path))
# A module-level name bound to a test class is loaded as one more class:
# without this the loader runs NoneToSpare's tests twice.
del _path, _cls
