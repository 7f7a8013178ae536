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

"""The upgrade runs the new release's tools, on the same cloud."""

import configparser
import os
import subprocess
import sys

import fixtures

from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import process
from rdt_virt.cloud import upgrade
from rdt_virt.cloud import upgrade_plan as plan
from rdt_virt.cloud import upgrade_services
from tests import base
from tests.unit.emulator import test_enforce


class TestServices(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.new = cloud_mod.Cloud(os.path.join(self.tmp, 'cloud'),
                                   venv_bin='/venvs/new/bin')
        self.services = upgrade_services.Services(self.new,
                                                  '/venvs/gnocchi/bin')

    def test_the_cloud_starts_services_from_the_environment_given(self):
        self.assertEqual('/venvs/new/bin/nova-manage',
                         self.new.layout.tool('nova-manage'))
        self.assertEqual('/venvs/new', self.new.layout.venv)

    def test_gnocchi_keeps_its_own_environment(self):
        self.assertEqual('/venvs/gnocchi/bin/gnocchi-upgrade',
                         self.services.tool('gnocchi-upgrade'))
        self.assertEqual('/venvs/new/bin/glance-manage',
                         self.services.tool('glance-manage'))

    def test_every_configuration_file_a_step_names_is_known(self):
        confs = self.services.confs()
        for step in plan.steps():
            for cmd in step.before + step.after:
                argv = plan.format_argv(cmd.argv, confs)
                self.assertFalse([a for a in argv if '{' in a], argv)
        self.assertTrue(all(p.startswith(self.new.layout.etc())
                            for p in confs.values()))

    def test_every_daemon_a_step_starts_has_a_way_to_start(self):
        known = set(cloud_mod.WSGI) | {
            'nova-conductor', 'nova-scheduler', 'watcher-decision-engine',
            'watcher-applier', 'ceilometer-notification', 'gnocchi-api',
            'gnocchi-metricd'}
        for step in plan.steps():
            for name in step.start:
                host = name.split('-', 1)[0]
                self.assertTrue(name in known or host in ('compute1',
                                                          'compute2'),
                                name)

    def test_an_unknown_daemon_is_refused(self):
        self.assertRaises(upgrade_services.UpgradeError,
                          self.services.start, 'nova-cells')

    def test_the_new_privsep_helper_goes_into_both_configurations(self):
        nova = self.new.layout.etc('nova', 'nova-cpu-compute1.conf')
        agent = self.new.host_dir('compute1', 'etc', 'rdt-virt.conf')
        for path in (nova, agent):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write('[DEFAULT]\ndebug = False\n')
        self.services.retool('compute1')
        conf = configparser.ConfigParser()
        conf.read(nova)
        for section in ('privsep', 'nova_sys_admin', 'privsep_osbrick'):
            self.assertEqual('/venvs/new/bin/privsep-helper --config-file '
                             '%s' % nova, conf.get(section,
                                                   'helper_command'))
        conf = configparser.ConfigParser()
        conf.read(agent)
        self.assertEqual('sudo /venvs/new/bin/privsep-helper --config-file '
                         '%s' % agent,
                         conf.get('rdt_virt_privsep', 'helper_command'))
        self.assertEqual('False', conf.get('DEFAULT', 'debug'))

    def test_compute_rpc_is_capped_in_every_nova_configuration(self):
        paths = [self.new.layout.etc('nova', n) for n in (
            'nova.conf', 'nova-api.conf', 'nova-cpu-compute1.conf')]
        os.makedirs(os.path.dirname(paths[0]))
        for path in paths:
            with open(path, 'w') as f:
                f.write('[DEFAULT]\ndebug = False\n')
        self.services.pin_compute_rpc()
        for path in paths:
            conf = configparser.ConfigParser()
            conf.read(path)
            self.assertEqual('auto', conf.get('upgrade_levels', 'compute'),
                             path)
            self.assertEqual('False', conf.get('DEFAULT', 'debug'))

    def test_the_control_plane_is_every_daemon_but_the_computes(self):
        for name in ('nova-api', 'mariadb', 'gnocchi-metricd', 'keystone'):
            self.assertTrue(upgrade_services.elsewhere(name), name)
        for name in ('compute1-nova-compute', 'compute2-rdt-virt-agent',
                     'compute1-rdt-virt-sandbox'):
            self.assertFalse(upgrade_services.elsewhere(name), name)

    def test_another_host_is_elsewhere_too(self):
        for name in ('nova-api', 'compute2-nova-compute',
                     'compute2-rdt-virt-sandbox'):
            self.assertTrue(upgrade_services.elsewhere(name, 'compute1'),
                            name)
        self.assertFalse(upgrade_services.elsewhere('compute1-nova-compute',
                                                    'compute1'))
        self.assertFalse(upgrade_services.elsewhere('compute2-nova-compute'))
        self.services.home = 'compute1'
        pid = self.new.daemons.start('compute2-nova-compute', ['sleep', '60'],
                                     marker='sleep')
        self.addCleanup(self.new.daemons.stop, 'compute2-nova-compute')
        self.assertEqual(upgrade_services.CONTROL_NICE,
                         os.getpriority(os.PRIO_PROCESS, pid))

    def test_the_control_plane_yields_the_cpu_and_the_computes_do_not(self):
        daemons = self.new.daemons
        pids = {name: daemons.start(name, ['sleep', '60'], marker='sleep')
                for name in ('keystone', 'compute1-nova-compute')}
        self.addCleanup(daemons.stop_all, list(pids))
        base_nice = os.getpriority(os.PRIO_PROCESS, 0)
        self.services.yield_cpu()
        self.assertEqual(upgrade_services.CONTROL_NICE, os.getpriority(
            os.PRIO_PROCESS, pids['keystone']))
        self.assertEqual(base_nice, os.getpriority(
            os.PRIO_PROCESS, pids['compute1-nova-compute']))
        # Each daemon is a session of its own: where the kernel groups
        # sessions, the nice value weighs only inside the group.
        if os.path.exists('/proc/self/autogroup'):
            for name, nice in (('keystone', upgrade_services.CONTROL_NICE),
                               ('compute1-nova-compute', 0)):
                with open('/proc/%d/autogroup' % pids[name]) as f:
                    self.assertTrue(f.read().strip().endswith(
                        ' nice %d' % nice), name)

    def test_a_control_plane_daemon_yields_from_its_spawn(self):
        daemons = self.new.daemons
        pids = {name: daemons.start(name, ['sleep', '60'], marker='sleep')
                for name in ('glance-api', 'compute2-rdt-virt-agent')}
        self.addCleanup(daemons.stop_all, list(pids))
        self.assertEqual(upgrade_services.CONTROL_NICE, os.getpriority(
            os.PRIO_PROCESS, pids['glance-api']))
        self.assertEqual(os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(
            os.PRIO_PROCESS, pids['compute2-rdt-virt-agent']))

    def test_what_a_host_step_starts_runs_at_the_hosts_priority(self):
        # Raising a priority back takes root, as the upgrade runs.
        self.require(os.geteuid() == 0, 'needs root')
        was = os.getpriority(os.PRIO_PROCESS, 0)
        with upgrade_services.priority(upgrade_services.CONTROL_NICE):
            self.assertEqual(upgrade_services.CONTROL_NICE,
                             os.getpriority(os.PRIO_PROCESS, 0))
            with upgrade_services.priority(was):
                pid = self.new.daemons.start('compute1-x', ['sleep', '60'],
                                             marker='sleep')
                self.addCleanup(self.new.daemons.stop, 'compute1-x')
            self.assertEqual(upgrade_services.CONTROL_NICE,
                             os.getpriority(os.PRIO_PROCESS, 0))
        self.assertEqual(was, os.getpriority(os.PRIO_PROCESS, pid))
        self.assertEqual(was, os.getpriority(os.PRIO_PROCESS, 0))

    def test_a_steps_tool_runs_at_the_control_planes_priority(self):
        bin_dir = os.path.join(self.tmp, 'bin')
        os.makedirs(bin_dir)
        seen = os.path.join(self.tmp, 'nice')
        tool = os.path.join(bin_dir, 'nova-manage')
        with open(tool, 'w') as f:
            f.write('#!/bin/sh\nnice > %s\n' % seen)
        os.chmod(tool, 0o755)
        new = cloud_mod.Cloud(os.path.join(self.tmp, 'cloud'),
                              venv_bin=bin_dir)
        os.makedirs(new.daemons.log_dir)     # the cloud's up made it
        out = []
        upgrade_services.Services(new, bin_dir, out.append).command(
            plan.Command(['nova-manage', 'db', 'sync'], (0,)))
        with open(seen) as f:
            self.assertEqual(upgrade_services.CONTROL_NICE, int(f.read()))
        self.assertTrue(out[0].startswith('$ nova-manage db sync '), out)

    def guest(self, host, name):
        """A QEMU stand-in: threads, a session of its own, a pid file.

        The pid file is where ``host``'s libvirtd writes its guests'.
        """
        proc = subprocess.Popen(
            [sys.executable, '-c', 'import threading, time\n'
             'for _ in range(3):\n'
             '    threading.Thread(target=time.sleep, args=(60,),\n'
             '                     daemon=True).start()\n'
             'print(flush=True)\n'
             'time.sleep(60)\n'], stdout=subprocess.PIPE,
            start_new_session=True)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        proc.stdout.readline()      # its threads run
        os.makedirs(self.new.daemons.run_dir, exist_ok=True)
        run = os.path.join(self.new.host_dir(host, 'sandbox'), 'private',
                           'run', 'libvirt', 'qemu')
        os.makedirs(run, exist_ok=True)
        with open(os.path.join(run, name + '.pid'), 'w') as f:
            f.write('%d\n' % proc.pid)
        return proc.pid

    @staticmethod
    def nices(pid):
        return {os.getpriority(os.PRIO_PROCESS, int(tid))
                for tid in os.listdir('/proc/%d/task' % pid)}

    def test_the_other_hosts_guests_yield_with_every_thread(self):
        away = self.guest('compute2', 'instance-00000002')
        here = self.guest('compute1', 'instance-00000001')
        base_nice = os.getpriority(os.PRIO_PROCESS, 0)
        self.assertEqual([away], upgrade_services.guests(
            self.new.host_dir('compute2', 'sandbox')))
        self.assertEqual(4, len(os.listdir('/proc/%d/task' % away)))
        # Without a home, no host is another machine's.
        self.services.yield_cpu()
        self.assertEqual({base_nice}, self.nices(away))
        self.services.home = 'compute1'
        self.services.yield_cpu()
        self.assertEqual({upgrade_services.CONTROL_NICE}, self.nices(away))
        self.assertEqual({base_nice}, self.nices(here))
        if os.path.exists('/proc/self/autogroup'):
            with open('/proc/%d/autogroup' % away) as f:
                self.assertTrue(f.read().strip().endswith(
                    ' nice %d' % upgrade_services.CONTROL_NICE))
        if os.geteuid() == 0:
            # The upgrade's end gives them their priority back.
            self.services.yield_cpu(upgrade_services.HOST_NICE)
            self.assertEqual({upgrade_services.HOST_NICE}, self.nices(away))

    def test_a_guest_started_during_a_step_yields_at_the_next_look(self):
        # What a boot or a live migration's destination starts on the
        # other host, after the step's first look.
        self.services.home = 'compute1'
        self.services.lower_guests()
        base_nice = os.getpriority(os.PRIO_PROCESS, 0)
        away = self.guest('compute2', 'instance-00000004')
        here = self.guest('compute1', 'instance-00000005')
        self.assertEqual({base_nice}, self.nices(away))
        self.services.lower_guests()
        self.assertEqual({upgrade_services.CONTROL_NICE}, self.nices(away))
        self.assertEqual({base_nice}, self.nices(here))

    def test_a_guests_stale_pid_file_is_passed_over(self):
        run = os.path.join(self.new.host_dir('compute2', 'sandbox'),
                           'private', 'run', 'libvirt', 'qemu')
        os.makedirs(run)
        with open(os.path.join(run, 'instance-00000003.pid'), 'w') as f:
            f.write('')
        self.assertEqual([], upgrade_services.guests(
            self.new.host_dir('compute2', 'sandbox')))
        self.assertFalse(upgrade_services.lower_guest(2 ** 22 + 1, 19))


class TestGuestWeight(base.TestCase):
    """The other host's guests weigh as little as their nice value says."""

    DOMAIN = '/machine/qemu-5-instance-00000002.libvirt-qemu'

    def cgroups(self, version):
        tmp = self.useFixture(fixtures.TempDir()).path
        fake = test_enforce.FakeCgroups(tmp, version)
        fake.place(4242, self.DOMAIN + '/emulator')
        return fake

    def test_the_domains_cgroup_weighs_as_a_task_at_that_nice(self):
        for version, name, lowest, default in ((1, 'cpu.shares', 15, 1024),
                                               (2, 'cpu.weight', 1, 100)):
            fake = self.cgroups(version)
            path = upgrade_services.weigh_guest(
                4242, upgrade_services.CONTROL_NICE, fake.cgroup, fake.proc)
            # The domain's, above its emulator and vCPU cgroups: those
            # weigh only against each other.
            self.assertEqual(os.path.join(fake.mount,
                                          self.DOMAIN.lstrip('/')), path)
            self.assertEqual(str(lowest),
                             fake.read(self.DOMAIN + '/' + name))
            upgrade_services.weigh_guest(4242, upgrade_services.HOST_NICE,
                                         fake.cgroup, fake.proc)
            self.assertEqual(str(default),
                             fake.read(self.DOMAIN + '/' + name))

    def test_a_process_in_no_domains_cgroup_is_left_alone(self):
        fake = self.cgroups(1)
        fake.place(4343, '/user.slice/session-1.scope')
        self.assertIsNone(upgrade_services.weigh_guest(4343, 19, fake.cgroup,
                                                       fake.proc))
        self.assertFalse(fake.exists('/user.slice/session-1.scope/'
                                     'cpu.shares'))
        self.assertIsNone(upgrade_services.weigh_guest(4444, 19, fake.cgroup,
                                                       fake.proc))


class TestAgentStart(base.TestCase):
    """An upgraded agent serves before the host's other services start."""

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.bin = os.path.join(tmp, 'bin')
        os.makedirs(self.bin)
        self.new = cloud_mod.Cloud(os.path.join(tmp, 'cloud'),
                                   venv_bin=self.bin)
        os.makedirs(self.new.daemons.log_dir)    # the cloud's up made it
        self.port = process.free_port()
        self.new.layout.ports = {'agent_prom_compute2': self.port}
        self.services = upgrade_services.Services(self.new, self.bin)
        self.addCleanup(self.new.daemons.stop, 'compute2-rdt-virt-agent')

    def agent(self, body):
        path = os.path.join(self.bin, 'rdt-virt-agent')
        with open(path, 'w') as f:
            f.write('#!%s\nimport socket, sys, time\n%s' % (
                sys.executable, body))
        os.chmod(path, 0o755)

    def test_the_agent_listens_once_its_start_returns(self):
        # Its imports and privsep daemon take a while before it serves.
        self.agent('time.sleep(1.0)\n'
                   's = socket.socket()\n'
                   's.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
                   's.bind(("127.0.0.1", %d))\n'
                   's.listen()\n'
                   'time.sleep(60)\n' % self.port)
        self.assertFalse(process.port_open('127.0.0.1', self.port))
        self.services._start('compute2-rdt-virt-agent')
        self.assertTrue(process.port_open('127.0.0.1', self.port))

    def test_an_agent_that_exits_before_it_serves_fails_the_step(self):
        self.agent('sys.exit("no resctrl")\n')
        self.assertRaises(process.ProcessError, self.services._start,
                          'compute2-rdt-virt-agent')


class TestGroups(base.TestCase):

    def test_the_controllers_levels_are_not_static(self):
        self.assertFalse(upgrade.static_group('rdtvirt-mb40'))
        self.assertTrue(upgrade.static_group(
            'qemu-3-instance-00000003-vcpus_0'))
        self.assertTrue(upgrade.static_group('rdtvirt-shared'))
