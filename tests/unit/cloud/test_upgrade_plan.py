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

"""The test cloud's upgrade steps, in the order the upgrade page gives."""

from rdt_virt.cloud import upgrade_plan as plan
from tests import base


def _names(steps):
    return [s.name for s in steps]


def _tools(step):
    return [c.argv[0] for c in step.before + step.after]


class TestParse(base.TestCase):

    def test_slurp_to_slurp(self):
        self.assertEqual(('2025.1', '2026.1'), plan.parse('2025.1:2026.1'))

    def test_other_upgrades_are_refused_with_the_ones_run(self):
        for spec in ('2026.1:2025.1', '2025.1:2026.2', '2025.1', '', None,
                     '2025.1:2026.1:2026.2'):
            e = self.assertRaises(ValueError, plan.parse, spec)
            self.assertIn('2025.1:2026.1', str(e))

    def test_the_release_of_a_nova(self):
        self.assertEqual('2025.1', plan.release_of('31.3.1'))
        self.assertEqual('2026.1', plan.release_of('33.0.2'))
        self.assertIsNone(plan.release_of('35.0.0'))
        self.assertIsNone(plan.release_of('unknown'))

    def test_every_release_has_an_environment(self):
        for old, new in plan.UPGRADES:
            self.assertIn(old, plan.ENVS)
            self.assertIn(new, plan.ENVS)


class TestSteps(base.TestCase):

    def setUp(self):
        super().setUp()
        self.steps = plan.steps()
        self.kinds = [s.kind for s in self.steps]

    def test_control_plane_then_mixed_then_each_compute_then_finish(self):
        control = self.kinds.count(plan.CONTROL)
        self.assertEqual([plan.CONTROL] * control +
                         [plan.MIXED, plan.COMPUTE, plan.COMPUTE,
                          plan.FINISH], self.kinds)
        self.assertEqual(['compute2', 'compute1'],
                         [s.host for s in self.steps
                          if s.kind == plan.COMPUTE])

    def test_every_service_of_the_control_plane_in_order(self):
        self.assertEqual(
            ['Keystone', 'Placement', 'Glance', "Neutron's API",
             "Nova's conductor, scheduler and API", 'Gnocchi',
             "Ceilometer's notification agent", 'Watcher'],
            _names(s for s in self.steps if s.kind == plan.CONTROL))

    def test_each_service_runs_its_own_migrations(self):
        by_name = {s.name: s for s in self.steps}
        expected = {
            'Keystone': ['keystone-manage'] * 4,
            'Placement': ['placement-manage'] * 2,
            'Glance': ['glance-manage'] * 3,
            "Neutron's API": ['neutron-db-manage'],
            "Nova's conductor, scheduler and API": [
                'nova-manage', 'nova-manage', 'nova-status'],
            'Gnocchi': ['gnocchi-upgrade'],
            "Ceilometer's notification agent": ['ceilometer-upgrade'],
            'Watcher': ['watcher-db-manage'],
        }
        for name, tools in expected.items():
            self.assertEqual(tools, _tools(by_name[name]), name)
        keystone = [c.argv[-1] for c in by_name['Keystone'].before]
        self.assertEqual(['--expand', '--migrate', '--contract'], keystone)
        glance = [c.argv[-1] for c in by_name['Glance'].before]
        self.assertEqual(['expand', 'migrate', 'contract'], glance)
        nova = [c.argv[3:5] for c in
                by_name["Nova's conductor, scheduler and API"].before[:2]]
        self.assertEqual([['api_db', 'sync'], ['db', 'sync']], nova)

    def test_online_data_migrations_wait_for_every_service(self):
        last = self.steps[-1]
        self.assertEqual(['nova-manage', '--config-file', '{nova}', 'db',
                          'online_data_migrations'], last.after[0].argv)

    def test_exit_code_1_passes_only_for_advice_and_migrations_done(self):
        lenient = [' '.join(c.argv[3:] if c.argv[1] == '--config-file'
                            else c.argv[1:]) for s in self.steps
                   for c in s.before + s.after if c.codes != (0,)]
        self.assertEqual(['doctor', 'db online_data_migrations',
                          'upgrade check', 'db online_data_migrations'],
                         lenient)
        codes = {' '.join(c.argv[3:]): c.codes for s in self.steps
                 for c in s.before + s.after if c.codes != (0,)}
        # doctor's exit code is the number of its advices.
        self.assertEqual({'doctor': None, 'db online_data_migrations': (0, 1),
                          'upgrade check': (0, 1)}, codes)

    def test_nova_conductor_starts_before_the_scheduler_and_the_api(self):
        nova = [s for s in self.steps if s.name.startswith("Nova's")][0]
        self.assertEqual(['nova-conductor', 'nova-scheduler', 'nova-api'],
                         nova.start)
        self.assertEqual(sorted(nova.stop), sorted(nova.start))

    def test_the_plugin_runs_again_for_the_computes_only(self):
        # The scheduler's settings are kept; the driver's loader goes into
        # each new Nova that runs nova-compute.
        self.assertEqual([[(h, ('n-cpu',))] for h in ('compute2',
                                                      'compute1')],
                         [s.plugin for s in self.steps if s.plugin])

    def test_a_compute_host_restarts_its_three_services_together(self):
        step = plan.compute('compute1')
        self.assertEqual(['compute1-nova-compute', 'compute1-rdt-virt-agent',
                          'compute1-ceilometer-polling'], step.stop)
        self.assertEqual([['compute1-nova-compute',
                           'compute1-ceilometer-polling'],
                          ['compute1-rdt-virt-agent']],
                         plan.stop_order(step))
        # The agent is down only while it restarts, not while nova-compute
        # shuts down and starts.
        self.assertEqual(['compute1-rdt-virt-agent', 'compute1-nova-compute',
                          'compute1-ceilometer-polling'], step.start)
        self.assertEqual([], step.before)
        self.assertEqual([('compute1', ('n-cpu',))], step.plugin)

    def test_the_sandboxes_and_shared_services_are_never_restarted(self):
        stopped = [d for s in self.steps for d in s.stop]
        for name in ('mariadb', 'rabbitmq', 'prometheus',
                     'compute1-rdt-virt-sandbox', 'compute1-sshd'):
            self.assertNotIn(name, stopped)

    def test_other_steps_stop_their_daemons_at_once(self):
        for step in self.steps:
            if step.kind != plan.COMPUTE and step.stop:
                self.assertEqual([step.stop], plan.stop_order(step),
                                 step.name)

    def test_every_daemon_stopped_is_started_again(self):
        for step in self.steps:
            self.assertEqual(sorted(step.stop), sorted(step.start),
                             step.name)


class TestFormat(base.TestCase):

    def test_configuration_files_are_filled_in(self):
        self.assertEqual(
            ['nova-manage', '--config-file', '/etc/nova.conf', 'db', 'sync'],
            plan.format_argv(['nova-manage', '--config-file', '{nova}', 'db',
                              'sync'], {'nova': '/etc/nova.conf'}))

    def test_a_missing_file_is_an_error(self):
        self.assertRaises(KeyError, plan.format_argv, ['x', '{glance}'], {})


class TestMovable(base.TestCase):

    def test_only_where_the_other_host_has_every_required_trait(self):
        no_mba = {'CUSTOM_RDT_L3_CAT', 'CUSTOM_RDT_CMT', 'CUSTOM_RDT_MBM'}
        self.assertTrue(plan.movable([], no_mba))
        self.assertTrue(plan.movable(['CUSTOM_RDT_L3_CAT'], no_mba))
        self.assertFalse(plan.movable(['CUSTOM_RDT_MBA'], no_mba))
        self.assertFalse(plan.movable(['CUSTOM_RDT_L3_CAT',
                                       'CUSTOM_RDT_MBA'], no_mba))
