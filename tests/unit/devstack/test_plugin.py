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

"""The DevStack plugin's phases, with DevStack's helpers as recorders.

DevStack itself needs systemd and a whole cloud; here ``devstack/settings``
and ``devstack/plugin.sh`` are sourced as DevStack sources them, phase by
phase, with its helper functions replaced by recorders
(``tests/unit/devstack/stubs.sh``). The tests assert the recorded calls and
the files the plugin writes itself (rdt-virt.conf, Ceilometer's
polling.yaml).
"""

import os
import subprocess
import tempfile

import yaml

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
STUBS = os.path.join(REPO, 'tests', 'unit', 'devstack', 'stubs.sh')
PHASES = [('stack', 'install'), ('stack', 'post-config'), ('stack', 'extra'),
          ('unstack', ''), ('clean', '')]
SANDBOX = 'rdt-virt-sandbox'


class TestDevStackPlugin(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp()
        self.record = os.path.join(self.tmp, 'record')
        self.bin = os.path.join(self.tmp, 'bin')
        os.mkdir(self.bin)
        # The plugin's own commands, recording their arguments.
        for name in ('rdt-virt-nova-loader', 'rdt-virt-sandbox',
                     'rdt-virt-agent', 'rdt-virt-gnocchi-resources'):
            path = os.path.join(self.bin, name)
            with open(path, 'w') as f:
                f.write('#!/bin/bash\necho "%s|$*" >> %s\n' % (
                    name, self.record))
            os.chmod(path, 0o755)
        self.polling = os.path.join(self.tmp, 'polling.yaml')
        self.state_file = os.path.join(self.tmp, 'run', 'host-state.json')
        self.ceilometer_conf = os.path.join(self.tmp, 'ceilometer.conf')
        self.conf_dir = os.path.join(self.tmp, 'etc-rdt-virt')

    def run_plugin(self, services, phases=PHASES, **env):
        script = ['set -e', 'source %s' % STUBS,
                  'source %s/devstack/settings' % REPO,
                  # local.conf's "disable_service rdt-virt-agent".
                  '[ -z "$RDT_VIRT_SKIP_AGENT" ] || '
                  'disable_service rdt-virt-agent']
        for one, two in phases:
            script.append('source %s/devstack/plugin.sh %s %s' % (
                REPO, one, two))
        environ = {
            'PATH': os.environ['PATH'],
            'RDT_VIRT_SKIP_AGENT': '',
            'RECORD': self.record,
            'ENABLED_SERVICES': ' '.join(services),
            'DEST': '/opt/stack',
            'DATA_DIR': '/opt/stack/data',
            'NOVA_CONF': '/etc/nova/nova.conf',
            'NOVA_CPU_CONF': '/etc/nova/nova-cpu.conf',
            'NOVA_BIN_DIR': self.bin,
            'CEILOMETER_CONF': self.ceilometer_conf,
            'STACK_USER': 'root',
            'ENABLE_DEBUG_LOG_LEVEL': 'True',
            'RDT_VIRT_DIR': REPO,
            'RDT_VIRT_CONF_DIR': self.conf_dir,
            'RDT_VIRT_CEILOMETER_POLLING': self.polling,
            'RDT_VIRT_STATE_FILE': self.state_file,
        }
        environ.update(env)
        subprocess.run(['bash', '-c', '\n'.join(script)], env=environ,
                       check=True, cwd=self.tmp)
        with open(self.record) as f:
            calls = [tuple(line.rstrip('\n').split('|')) for line in f]
        os.unlink(self.record)
        return calls

    def inisets(self, calls, path):
        return {(c[2], c[3]): c[4] for c in calls
                if c[0] == 'iniset' and c[1] == path}

    def test_compute_and_scheduler_on_an_rdt_host(self):
        calls = self.run_plugin(
            ['n-cpu', 'n-sch', 'rdt-virt-agent'],
            phases=PHASES[:1], INIGET_filter_scheduler_enabled_filters=(
                'ComputeFilter,PciPassthroughFilter'))
        self.assertEqual([
            ('setup_develop', REPO),
            ('rdt-virt-nova-loader', 'install'),
        ], calls)

        calls = self.run_plugin(
            ['n-cpu', 'n-sch', 'rdt-virt-agent'], phases=PHASES[1:2],
            INIGET_filter_scheduler_enabled_filters=(
                'ComputeFilter,PciPassthroughFilter'))
        cpu = self.inisets(calls, '/etc/nova/nova-cpu.conf')
        self.assertEqual('rdtvirt.RDTLibvirtDriver',
                         cpu[('DEFAULT', 'compute_driver')])
        self.assertEqual('/sys/fs/resctrl', cpu[('rdt', 'resctrl_root')])
        self.assertEqual('per-instance', cpu[('rdt', 'mb_strategy')])
        self.assertEqual('2', cpu[('rdt', 'default_group_l3_ways')])
        self.assertNotIn(('libvirt', 'connection_uri'), cpu)
        api = self.inisets(calls, '/etc/nova/nova.conf')
        self.assertEqual('ComputeFilter,PciPassthroughFilter,RDTFilter',
                         api[('filter_scheduler', 'enabled_filters')])
        self.assertEqual(
            'nova.scheduler.weights.all_weighers,'
            'nova_plugin.scheduler.weights.RDTWeigher',
            api[('filter_scheduler', 'weight_classes')])
        self.assertEqual('1.0', api[('filter_scheduler',
                                     'rdt_weight_multiplier')])
        self.assertIn(('iniadd', '/etc/nova/nova.conf', 'filter_scheduler',
                       'available_filters',
                       'nova_plugin.scheduler.filters.RDTFilter'), calls)
        # The agent's configuration file starts from the sample.
        conf = os.path.join(self.conf_dir, 'rdt-virt.conf')
        with open(conf) as f:
            self.assertIn('[rdt_agent]', f.read())
        agent = self.inisets(calls, conf)
        self.assertEqual('qemu:///system',
                         agent[('rdt_agent', 'libvirt_uri')])
        # Unprivileged: the privsep daemon through sudo, with the agent's
        # configuration file, and a state directory the agent owns.
        self.assertEqual('sudo %s/privsep-helper --config-file %s' % (
            self.bin, conf), agent[('rdt_virt_privsep', 'helper_command')])
        self.assertIn(('sudo', 'install', '-d', '-o', 'root', '-m', '0755',
                       os.path.dirname(self.state_file)), calls)
        self.assertEqual('/sys/fs/resctrl', agent[('rdt', 'resctrl_root')])
        # No Ceilometer, no emulated host.
        self.assertFalse(os.path.exists(self.polling))
        self.assertFalse([c for c in calls if c[0] == 'run_process'])

        calls = self.run_plugin(['n-cpu', 'rdt-virt-agent'],
                                phases=PHASES[2:])
        self.assertEqual([
            ('run_process', 'rdt-virt-agent',
             '%s/rdt-virt-agent --config-file %s' % (self.bin, conf)),
            ('stop_process', 'rdt-virt-agent'),
            ('rdt-virt-nova-loader', 'remove'),
            ('sudo', 'rm', '-rf', self.conf_dir),
        ], calls)
        self.assertFalse(os.path.exists(self.conf_dir))

    def test_filters_default_to_novas_when_unset(self):
        calls = self.run_plugin(['n-sch', 'rdt-virt-agent'],
                                phases=PHASES[1:2])
        api = self.inisets(calls, '/etc/nova/nova.conf')
        self.assertEqual(
            'ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,'
            'ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,'
            'RDTFilter', api[('filter_scheduler', 'enabled_filters')])
        # A scheduler-only host gets no compute driver.
        self.assertEqual({}, self.inisets(calls, '/etc/nova/nova-cpu.conf'))

    def test_scheduler_can_be_left_alone(self):
        calls = self.run_plugin(['n-sch', 'rdt-virt-agent'],
                                phases=PHASES[1:2],
                                RDT_VIRT_ENABLE_SCHEDULER='False')
        self.assertEqual({}, self.inisets(calls, '/etc/nova/nova.conf'))

    def test_emulated_host(self):
        sandbox_dir = os.path.join(self.tmp, 'sandbox')
        services = ['n-cpu', 'rdt-virt-agent']
        env = {'RDT_VIRT_EMULATE': 'True',
               'RDT_VIRT_SANDBOX_DIR': sandbox_dir,
               'RDT_VIRT_EMULATED_PROFILE': 'cdp'}
        calls = self.run_plugin(services, phases=PHASES[:1], **env)
        self.assertIn(('install_package', 'fuse3', 'libfuse3-3'), calls)
        self.assertIn(('pip_install', 'mfusepy'), calls)

        calls = self.run_plugin(services, phases=PHASES[1:2], **env)
        uri = ('qemu:///system?socket=%s/private/run/libvirt/libvirt-sock'
               % sandbox_dir)
        cpu = self.inisets(calls, '/etc/nova/nova-cpu.conf')
        self.assertEqual(uri, cpu[('libvirt', 'connection_uri')])
        self.assertEqual(sandbox_dir + '/resctrl',
                         cpu[('rdt', 'resctrl_root')])
        agent = self.inisets(calls, os.path.join(self.conf_dir,
                                                 'rdt-virt.conf'))
        self.assertEqual(uri + '-ro', agent[('rdt_agent', 'libvirt_uri')])
        self.assertEqual(sandbox_dir + '/private/run/libvirt/qemu',
                         agent[('rdt_agent', 'qemu_pid_dir')])
        # The sandbox starts as a root service before nova-compute, and
        # the plugin waits until it is up.
        self.assertIn(('run_process', SANDBOX,
                       '%s/rdt-virt-sandbox run --dir %s --profile cdp' % (
                           self.bin, sandbox_dir), '', 'root'), calls)
        self.assertIn(('rdt-virt-sandbox', 'status --dir %s' % sandbox_dir),
                      calls)
        # Its own host name, for several emulated hosts on one machine.
        env['RDT_VIRT_SANDBOX_HOSTNAME'] = 'compute2'
        calls = self.run_plugin(services, phases=PHASES[1:2], **env)
        self.assertIn(('run_process', SANDBOX,
                       '%s/rdt-virt-sandbox run --dir %s --profile cdp '
                       '--hostname compute2' % (self.bin, sandbox_dir), '',
                       'root'), calls)
        cpu = self.inisets(calls, '/etc/nova/nova-cpu.conf')
        self.assertNotIn(('libvirt', 'live_migration_inbound_addr'), cpu)
        # Its own loopback address, where live migrations arrive.
        env['RDT_VIRT_SANDBOX_LISTEN'] = '127.0.0.3'
        calls = self.run_plugin(services, phases=PHASES[1:2], **env)
        self.assertIn(('run_process', SANDBOX,
                       '%s/rdt-virt-sandbox run --dir %s --profile cdp '
                       '--hostname compute2 --listen 127.0.0.3' % (
                           self.bin, sandbox_dir), '', 'root'), calls)
        cpu = self.inisets(calls, '/etc/nova/nova-cpu.conf')
        self.assertEqual('127.0.0.3',
                         cpu[('libvirt', 'live_migration_inbound_addr')])
        self.assertEqual('tcp', cpu[('libvirt', 'live_migration_scheme')])

        calls = self.run_plugin(services, phases=PHASES[3:4], **env)
        self.assertEqual([('stop_process', 'rdt-virt-agent'),
                          ('stop_process', SANDBOX)], calls)

    def test_ceilometer_polling(self):
        with open(self.polling, 'w') as f:
            f.write('---\nsources:\n    - name: some_pollsters\n'
                    '      interval: 300\n      meters:\n        - cpu\n')
        services = ['n-cpu', 'ceilometer-acompute', 'rdt-virt-agent']
        for _ in range(2):
            calls = self.run_plugin(services, phases=PHASES[1:2],
                                    RDT_VIRT_POLLING_INTERVAL='30')
        with open(self.polling) as f:
            sources = yaml.safe_load(f)['sources']
        # Added once, next to what was there.
        self.assertEqual([
            {'name': 'some_pollsters', 'interval': 300, 'meters': ['cpu']},
            {'name': 'rdt_pollsters', 'interval': 30,
             'meters': ['memory.bandwidth.total', 'memory.bandwidth.local',
                        'cpu_l3_cache', 'memory.bandwidth.limit']},
        ], sources)
        self.assertIn(('iniset', self.ceilometer_conf, 'rdt', 'state_file',
                       self.state_file), calls)

    def test_ceilometer_polling_created_when_missing(self):
        self.run_plugin(['ceilometer-acompute', 'rdt-virt-agent'],
                        phases=PHASES[1:2])
        with open(self.polling) as f:
            (source,) = yaml.safe_load(f)['sources']
        self.assertEqual('rdt_pollsters', source['name'])

    def test_gnocchi_resources_where_the_notification_agent_runs(self):
        calls = self.run_plugin(['ceilometer-anotification'],
                                phases=PHASES[:3])
        self.assertEqual([
            ('setup_develop', REPO),
            ('rdt-virt-gnocchi-resources',
             '--output /etc/ceilometer/gnocchi_resources.yaml'),
        ], calls)
        calls = self.run_plugin(
            ['ceilometer-anotification'], phases=PHASES[1:2],
            RDT_VIRT_GNOCCHI_RESOURCES='/etc/telemetry/resources.yaml')
        self.assertEqual([('rdt-virt-gnocchi-resources',
                           '--output /etc/telemetry/resources.yaml')], calls)

    def test_nothing_where_no_service_of_it_runs(self):
        with open(self.record, 'w'):
            pass
        calls = self.run_plugin(['key', 'g-api', 'q-svc'])
        self.assertEqual([], calls)

    def test_compute_without_the_agent(self):
        calls = self.run_plugin(['n-cpu'], phases=PHASES[:3],
                                RDT_VIRT_SKIP_AGENT='1')
        self.assertIn(('rdt-virt-nova-loader', 'install'), calls)
        self.assertFalse([c for c in calls if c[0] == 'run_process'])
        self.assertFalse(os.path.exists(self.conf_dir))
