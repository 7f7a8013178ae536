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

"""The control socket, server and client, over a real UNIX socket."""

import os
import tempfile

from rdt_virt.emulator import control
from tests.unit.emulator import fakes


class ControlTest(fakes.ModelTestCase):

    def setUp(self):
        super().setUp()
        path = os.path.join(tempfile.mkdtemp(), 'control')
        self.server = control.ControlServer(path, self.model)
        self.server.start()
        self.addCleanup(self.server.stop)
        self.client = control.ControlClient(path, timeout=5)
        self.tree.mkdir('/g1')
        self.tree.mkdir('/g1/mon_groups/m1')

    def test_ping_and_status(self):
        pong = self.client.ping()
        self.assertEqual({'pong': True, 'pid': os.getpid(),
                          'profile': 'reference', 'kernel': '7.1'}, pong)
        status = self.client.status()
        self.assertEqual('7.1', status['kernel'])
        self.assertIn('mon_rename', status['kernel_features'])
        self.assertEqual(['/', 'g1', 'g1/mon_groups/m1'], status['groups'])
        self.assertEqual([0, 1], status['domains'])
        self.assertEqual('ok\n', status['last_cmd_status'])

    def test_counters(self):
        self.client.set_counter('g1/mon_groups/m1', 1000, domain=0,
                                event='mbm_total_bytes')
        self.client.set_rate('g1', 100.0, domain=0, event='mbm_total_bytes')
        self.clock.advance(3)
        self.assertEqual('1300\n', self.read(
            '/g1/mon_data/mon_L3_00/mbm_total_bytes'))
        truth = self.client.truth()
        self.assertEqual(1300, truth['g1']['shown'][0]['mbm_total_bytes'])
        self.assertEqual({'value': 300, 'sentinel': None, 'injected': True,
                          'rate': 100.0},
                         truth['g1']['own'][0]['mbm_total_bytes'])
        self.client.set_sentinel('g1/mon_groups/m1', 'Unavailable', domain=0)
        self.assertEqual('Unavailable\n', self.read(
            '/g1/mon_groups/m1/mon_data/mon_L3_00/llc_occupancy'))
        self.client.set_sentinel('g1/mon_groups/m1', None)
        self.client.reset('g1')
        self.client.clear('g1')
        self.assertEqual('1000\n', self.read(
            '/g1/mon_data/mon_L3_00/mbm_total_bytes'))
        ops = [e['op'] for e in self.client.log()]
        self.assertEqual(['mkdir', 'mkdir', 'set_counter', 'set_rate',
                          'set_sentinel', 'set_sentinel', 'reset', 'clear'],
                         ops)
        self.assertEqual(['clear'], [e['op'] for e in self.client.log(7)])

    def test_remount(self):
        result = self.client.remount('cdp')
        self.assertEqual(['cdp'], result['mount_options'])
        self.assertEqual(['/'], result['groups'])
        self.assertIn('L3CODE', self.read('/schemata'))
        self.client.remount()
        self.assertEqual('cdp', self.client.ping()['profile'])
        self.assertEqual('remount', self.client.log()[-1]['op'])

    def test_limbo_delay(self):
        self.assertEqual(5.0, self.client.set_limbo_delay(5))
        self.assertEqual(5.0, self.model.limbo_delay)

    def test_limbo(self):
        rmid = self.model.find('g1/mon_groups/m1').rmid
        self.tree.rmdir('/g1/mon_groups/m1')
        limbo = self.client.limbo()
        self.assertEqual([rmid], [e['rmid'] for e in limbo['limbo']])
        self.assertEqual({0: 0, 1: 0}, limbo['limbo'][0]['occupancy'])
        limbo = self.client.set_limbo_occupancy(rmid, 1 << 20, domain=0)
        self.assertEqual({0: 1 << 20, 1: 0},
                         limbo['limbo'][0]['occupancy'])
        self.clock.advance(5)
        self.assertEqual([0], self.client.limbo()['limbo'][0][
            'busy_domains'])
        self.client.set_limbo_occupancy(rmid, 0)
        self.clock.advance(1)
        self.assertEqual([], self.client.limbo()['limbo'])
        self.assertRaises(control.ControlError,
                          self.client.set_limbo_occupancy, rmid, 0)

    def test_hardware_reset(self):
        # Intel counters are not reset behind the kernel's back.
        self.assertRaises(control.ControlError, self.client.hardware_reset,
                          'g1')
        self.client.remount('amd')
        self.tree.mkdir('/g1')
        self.client.set_counter('g1', 1000, domain=0,
                                event='mbm_total_bytes')
        self.client.hardware_reset('g1', seconds=1, domain=0,
                                   event='mbm_total_bytes')
        self.assertEqual('Unavailable\n', self.read(
            '/g1/mon_data/mon_L3_00/mbm_total_bytes'))
        self.clock.advance(1)
        self.assertEqual('%d\n' % ((1 << 44) * 64), self.read(
            '/g1/mon_data/mon_L3_00/mbm_total_bytes'))

    def test_errors(self):
        cases = [
            (lambda: self.client.call('nope'), "unknown op 'nope'"),
            (lambda: self.client.set_counter('g9', 1), "no group 'g9'"),
            (lambda: self.client.set_sentinel('g1', 'Bogus'),
             "unknown sentinel 'Bogus'"),
            (lambda: self.client.set_counter('g1', 1, event='bogus'),
             'no counter'),
            (lambda: self.client.remount('skylake'), 'unknown profile'),
        ]
        for func, text in cases:
            e = self.assertRaises(control.ControlError, func)
            self.assertIn(text, str(e))
        self.client.remount('l3-cat')
        e = self.assertRaises(control.ControlError, self.client.reset, '/')
        self.assertIn('has no monitoring', str(e))
        # The server survives bad requests.
        self.assertTrue(self.client.ping()['pong'])

    def test_unreachable(self):
        client = control.ControlClient('/nonexistent/control')
        e = self.assertRaises(control.ControlError, client.ping)
        self.assertIn('cannot reach the emulator', str(e))
