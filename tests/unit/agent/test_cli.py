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

"""The rdt-virt command line on fixture trees and a state file."""

import io
import json
import os
import shutil
import time

import fixtures

from rdt_virt.agent import state
from rdt_virt.cmd import cli
from tests import base
from tests.unit.telemetry import test_pollsters


class TestCLI(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(tmp, 'resctrl')
        shutil.copytree(os.path.join(base.FIXTURES_DIR, 'resctrl',
                                     'reference'), self.root)
        self.state = os.path.join(tmp, 'state.json')

    def run_cli(self, *args):
        out = io.StringIO()
        code = cli.main(['--resctrl-root', self.root, '--state-file',
                         self.state] + list(args), out=out)
        return code, out.getvalue()

    def test_capabilities(self):
        code, text = self.run_cli('capabilities')
        self.assertEqual(0, code)
        self.assertIn('CLOSIDs:    8   RMIDs: 192', text)
        self.assertIn('L3:         mask 7ff (11 ways)', text)
        code, text = self.run_cli('capabilities', '--json')
        doc = json.loads(text)
        self.assertEqual('percent', doc['membw']['MB']['unit'])
        self.assertIn('MBM_TOTAL', doc['features'])

    def _emulated(self, profile):
        from rdt_virt.emulator import fromtree
        dest = self.useFixture(fixtures.TempDir()).path
        fromtree.render(profile, dest)
        shutil.rmtree(self.root)
        shutil.copytree(os.path.join(dest, 'resctrl'), self.root)

    def test_capabilities_of_a_host_with_package_telemetry(self):
        self._emulated('aet')
        code, text = self.run_cli('capabilities')
        self.assertEqual(0, code)
        # L3_MON has 1024, PERF_PKG_MON 576: the kernel hands out 576.
        self.assertIn('CLOSIDs:    16   RMIDs: 576', text)
        self.assertIn('telemetry:  activity', text)
        self.assertIn('PERF_PKG_MON has 576 RMIDs, fewer than L3_MON\'s '
                      '1024', text)
        doc = json.loads(self.run_cli('capabilities', '--json')[1])
        self.assertEqual(1024, doc['monitor']['num_rmids'])
        self.assertEqual(576, doc['package_monitor']['num_rmids'])
        self.assertIn('ENERGY', doc['features'])

    def test_capabilities_of_an_mpam_host(self):
        self._emulated('mpam')
        doc = json.loads(self.run_cli('capabilities', '--json')[1])
        self.assertEqual(('mpam', 4, 'percent'), (
            doc['arch'], doc['rmids_per_closid'],
            doc['membw']['MB']['unit']))
        self.assertIn('MPAM: 4 PMGs per CLOSID', ' '.join(doc['notes']))

    def test_capabilities_explain_the_closids_the_kernel_takes(self):
        for res in ('L3', 'MB'):
            with open(os.path.join(self.root, 'info', res, 'num_closids'),
                      'w') as f:
                f.write('64\n')
        with open(os.path.join(self.root, 'info', 'L3', 'io_alloc'),
                  'w') as f:
            f.write('enabled\n')
        release = os.path.join(os.path.dirname(self.root), 'osrelease')
        with open(release, 'w') as f:
            f.write('6.8.0-45-generic\n')
        code, text = self.run_cli('--kernel-release-file', release,
                                  'capabilities')
        self.assertEqual(0, code)
        self.assertIn('CLOSIDs:    31   RMIDs: 192', text)
        self.assertIn('Linux 6.8.0-45-generic uses at most 32 CLOSIDs',
                      text)
        self.assertIn('io_alloc is enabled', text)
        code, text = self.run_cli('--kernel-release-file', release,
                                  'capabilities', '--json')
        doc = json.loads(text)
        self.assertEqual(('6.8.0-45-generic', 32, True, 31), (
            doc['kernel_release'], doc['closid_limit'], doc['io_alloc'],
            doc['num_closids']))

    def test_capabilities_explain_the_intel_quirk(self):
        # A Xeon Gold 6252 (Cascade Lake): Linux leaves L3 CAT off.
        proc = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(proc, 'cpuinfo'), 'w') as f:
            f.write('processor\t: 0\nvendor_id\t: GenuineIntel\n'
                    'cpu family\t: 6\nmodel\t\t: 85\n'
                    'model name\t: Intel(R) Xeon(R) Gold 6252 CPU\n'
                    'stepping\t: 7\n\nprocessor\t: 1\n')
        with open(os.path.join(proc, 'cmdline'), 'w') as f:
            f.write('BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet\n')
        shutil.rmtree(os.path.join(self.root, 'info', 'L3'))
        code, text = self.run_cli('--proc-root', proc, 'capabilities')
        self.assertEqual(0, code)
        self.assertIn('note:       Linux turns L3_CAT off on Cascade Lake',
                      text)
        self.assertIn('boot with rdt=l3cat', text)
        code, text = self.run_cli('--proc-root', proc, 'capabilities',
                                  '--json')
        self.assertEqual(1, len(json.loads(text)['notes']))
        # Booted with rdt=l3cat: nothing to explain.
        with open(os.path.join(proc, 'cmdline'), 'w') as f:
            f.write('ro rdt=l3cat quiet\n')
        code, text = self.run_cli('--proc-root', proc, 'capabilities')
        self.assertNotIn('note:', text)

    def test_groups(self):
        code, text = self.run_cli('groups', '--json')
        rows = {r['group']: r for r in json.loads(text)}
        self.assertEqual('default', rows['/']['owner'])
        self.assertEqual('rdt-virt', rows['rdtvirt-mb10']['owner'])
        self.assertEqual('libvirt', rows[
            'qemu-1-instance-00000001-vcpus_0-1']['owner'])
        self.assertEqual('monitor', rows[
            'rdtvirt-m-4a0d3b9b-6e85-4f4d-8d8a-3c4b5a6f7e8d']['kind'])
        self.assertIn('MB:0=10;1=10', rows['rdtvirt-mb10']['schemata'])
        code, text = self.run_cli('groups')
        self.assertEqual(0, code)
        self.assertTrue(text.startswith('GROUP'))

    def test_top_once(self):
        state.write(self.state, test_pollsters.document(time.time()))
        code, text = self.run_cli('top', '--once')
        self.assertEqual(0, code)
        lines = text.splitlines()
        self.assertIn('instances 0', lines[0])
        self.assertEqual(['INSTANCE', 'UUID', 'GROUP', 'POLICY', 'CLASS',
                          'LEVEL', 'LLC[KiB]', 'MBL[MB/s]', 'MBT[MB/s]',
                          'NOTE'], lines[1].split())
        one = lines[2].split()
        self.assertEqual(['instance-1', '11111111', 'rdtvirt-mb10',
                          'mem_bw=10', 'normal', '-', '4096', '120.0',
                          '150.0'], one)
        self.assertIn('rotated out', lines[3])
        self.assertTrue(lines[4].startswith('HOST'))

    def test_top_shows_the_applied_bandwidth_and_the_request(self):
        # hw:mem_bw=15 on a host with steps of 10: the group holds 20.
        doc = test_pollsters.document(time.time())
        doc['instances'][test_pollsters.UUID1]['policy'] = {
            'mem_bw': 20, 'mem_bw_requested': 15, 'cache_l3': 3328}
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        self.assertEqual('cache_l3=3328,mem_bw=20(asked=15)',
                         text.splitlines()[2].split()[3])

    def test_top_shows_core_power_with_telemetry(self):
        doc = test_pollsters.document(time.time())
        doc['instances'][test_pollsters.UUID1]['power_watts'] = 3.5
        doc['host']['power_watts'] = 3.5
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        lines = text.splitlines()
        self.assertEqual('CORE[W]', lines[1].split()[-2])
        self.assertEqual(['150.0', '3.5'], lines[2].split()[-2:])
        self.assertEqual(['-', 'rotated', 'out'], lines[3].split()[-3:])
        self.assertEqual('3.5', lines[4].split()[-1])

    def test_top_shows_class_level_and_controller(self):
        doc = test_pollsters.document(time.time())
        doc['instances'][test_pollsters.UUID1].update(priority='low',
                                                      level=30)
        doc['host']['controller'] = {'unit': 'percent', 'domains': {
            '0': {'pressure': 0.91, 'capacity_bps': 1.2e10,
                  'capacity_source': 'learned', 'throttled': 1,
                  'active_high': 1, 'reason': 'pressure 0.91 >= high '
                                              'watermark 0.85'},
            '2': {'members': [2, 3], 'pressure': 0.2, 'capacity_bps': 2e10,
                  'capacity_source': 'configured', 'throttled': 0,
                  'active_high': 0, 'reason': 'between the watermarks'}}}
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        lines = text.splitlines()
        self.assertEqual('Controller domain 0: pressure 91%, capacity 12.0 '
                         'GB/s (learned), 1 throttled, 1 active high: '
                         'pressure 0.91 >= high watermark 0.85', lines[1])
        self.assertEqual('Controller domain 2 (pool of 2,3): pressure 20%, '
                         'capacity 20.0 GB/s (configured), 0 throttled, 0 '
                         'active high: between the watermarks', lines[2])
        self.assertEqual(['instance-1', '11111111', 'rdtvirt-mb10',
                          'mem_bw=10', 'low', '30%'], lines[4].split()[:6])

    def test_top_shows_the_level_in_force_then_the_next(self):
        # Decided at this sample, applied at the next tick: the group
        # shown still holds 30%.
        doc = test_pollsters.document(time.time())
        doc['instances'][test_pollsters.UUID1].update(
            priority='low', level=30, level_next=10)
        doc['host']['controller'] = {'unit': 'percent', 'domains': {}}
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        self.assertEqual(['instance-1', '11111111', 'rdtvirt-mb10',
                          'mem_bw=10', 'low', '30%>10%'],
                         text.splitlines()[2].split()[:6])

    def test_top_shows_counter_coverage(self):
        doc = test_pollsters.document(time.time())
        doc['host'].update(counter_mode='mbm_event', mbm_counters_total=32,
                           mbm_counters_available=0, counter_coverage=0.4,
                           instances_with_counters=16)
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        self.assertIn('MBM counters: mbm_event mode, 32 per domain, 0 free, '
                      '16 instances counted (40%)', text.splitlines()[1])

    def test_top_on_a_stale_state_file(self):
        # The agent was killed: its last table must not pass for current,
        # and a script must tell from the exit status. The pollsters' rule:
        # stale after three sample intervals, and at least a minute.
        now = time.time()
        state.write(self.state, test_pollsters.document(now - 59))
        code, text = self.run_cli('top', '--once')
        self.assertEqual(0, code)
        self.assertNotIn('STALE', text)
        written = now - 80
        state.write(self.state, test_pollsters.document(written))
        code, text = self.run_cli('top', '--once')
        self.assertEqual(cli.STALE, code)
        first = text.splitlines()[0]
        self.assertIn('STALE: no sample in %s since %s (8' % (
            self.state, time.strftime('%Y-%m-%d %H:%M:%S',
                                      time.localtime(written))), first)
        self.assertIn('stale after 60 s): is rdt-virt-agent running?',
                      first)
        # The live view says so at every refresh and ends the same way.
        code, text = self.run_cli('top', '--count', '2', '--interval', '0')
        self.assertEqual(cli.STALE, code)
        self.assertEqual(2, text.count('STALE: '))
        # A longer interval moves the limit: 80 s is not three of 30 s.
        doc = test_pollsters.document(written)
        doc['interval'] = 30.0
        state.write(self.state, doc)
        code, text = self.run_cli('top', '--once')
        self.assertEqual(0, code)

    def test_top_without_agent(self):
        code, text = self.run_cli('top', '--once')
        self.assertEqual(1, code)
        self.assertIn('is rdt-virt-agent running?', text)

    def test_top_says_why_it_cannot_use_the_state(self):
        state.write(self.state, test_pollsters.document(time.time()))
        os.chmod(self.state, 0o666)
        code, text = self.run_cli('top', '--once')
        self.assertEqual(1, code)
        self.assertIn('writable by group or others (mode 666)', text)
        self.assertNotIn('is rdt-virt-agent running?', text)
        os.chmod(self.state, 0o644)
        with open(self.state, 'r+') as f:
            f.truncate(10)
        code, text = self.run_cli('top', '--once')
        self.assertEqual(1, code)
        self.assertIn('cannot use %s: invalid rdt-virt state document'
                      % self.state, text)

    def test_not_mounted(self):
        out = io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', io.StringIO()))
        code = cli.main(['--resctrl-root', '/nonexistent', 'groups'],
                        out=out)
        self.assertEqual(1, code)
