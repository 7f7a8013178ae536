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

import json
import os
import shutil
import time

import fixtures

from nova_plugin.virt import host
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info
from tests import base

TREES = os.path.join(base.FIXTURES_DIR, 'resctrl')


class TestReadResctrl(base.TestCase):

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(level=30))

    def tree(self, variant):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, variant)
        shutil.copytree(os.path.join(TREES, variant), path)
        return fs.Resctrl(path)

    def test_reference(self):
        state = host.read_resctrl(self.tree('reference'))
        self.assertEqual({info.L3_CAT, info.MBA, info.CMT, info.MBM_TOTAL,
                          info.MBM_LOCAL}, set(state.caps.features))
        # 8 MB CLOSIDs - default - 3 groups; 192 RMIDs - 1 - 3 - 5.
        self.assertEqual(4, state.capacity.free_closids)
        self.assertEqual(183, state.capacity.free_rmids)
        self.assertEqual({0: 0xc, 1: 0xf}, state.capacity.free_masks['L3'])
        self.assertEqual(frozenset([10]), state.capacity.shared_groups)
        self.assertIn('batch', state.group_names)

    def test_not_mounted_is_no_rdt(self):
        state = host.read_resctrl(fs.Resctrl(self.useFixture(
            fixtures.TempDir()).path))
        self.assertFalse(state.caps.rdt_enabled)
        self.assertEqual(0, state.capacity.free_closids)
        self.assertEqual(state, host.read_resctrl(self.tree('none')))

    def test_restricted_to_libvirt_ids(self):
        resctrl = self.tree('reference')
        state = host.read_resctrl(resctrl, {'L3': (0, 1), 'MB': (0, 1)})
        self.assertEqual({'L3'}, set(state.caps.caches))
        self.assertEqual({'MB'}, set(state.caps.membw))
        # libvirt knows only cache 0 (an emulated host on a one-socket
        # machine): no cache allocation, and no MBA without its nodes.
        state = host.read_resctrl(resctrl, {'L3': (0,)})
        self.assertEqual({}, dict(state.caps.caches))
        self.assertEqual({}, dict(state.caps.membw))
        self.assertIsNotNone(state.caps.monitor)
        self.assertIn('libvirt does not know L3 cache ids [1]',
                      self.logger.output)

    def test_mbps_needs_no_libvirt_nodes(self):
        # rdt-virt-agent, not libvirt, applies MBps limits.
        state = host.read_resctrl(self.tree('mba-mbps'), {'L3': (0, 1)})
        self.assertEqual(info.UNIT_MBPS, state.caps.mb.unit)

    def test_safe_read_logs_errors(self):
        resctrl = self.tree('reference')
        os.unlink(os.path.join(resctrl.root, 'info', 'MB', 'num_closids'))
        state = host.safe_read(resctrl)
        self.assertFalse(state.caps.rdt_enabled)
        self.assertIn('Cannot read RDT state', self.logger.output)


class TestAgentBandwidth(base.TestCase):

    def write(self, doc):
        path = os.path.join(self.useFixture(
            fixtures.TempDir()).path, 'state.json')
        with open(path, 'w') as f:
            json.dump(doc, f)
        return path

    def test_fresh(self):
        now = time.time()
        path = self.write({'version': 1, 'time': now - 5, 'interval': 10,
                           'host': {'mbm_total_bps': 1.5e9}})
        self.assertEqual(1.5e9, host.agent_bandwidth(path, now))

    def test_hostile_numbers(self):
        # A bandwidth that is not a finite number must not reach the
        # weigher; a time that is not one must not count as fresh.
        now = time.time()
        for doc in ({'version': 1, 'time': now, 'host': {
                        'mbm_total_bps': float('inf')}},
                    {'version': 1, 'time': now, 'host': {
                        'mbm_total_bps': float('nan')}},
                    {'version': 1, 'time': float('nan'), 'host': {
                        'mbm_total_bps': 1.5e9}},
                    {'version': 1, 'time': now, 'host': {
                        'mbm_total_bps': -1.5e9}},
                    {'version': 1, 'time': now, 'host': {
                        'mbm_total_bps': True}}):
            self.assertIsNone(host.agent_bandwidth(self.write(doc), now),
                              doc)

    def test_stale_missing_and_garbage(self):
        now = time.time()
        stale = self.write({'version': 1, 'time': now - 61, 'interval': 10,
                            'host': {'mbm_total_bps': 1.5e9}})
        self.assertIsNone(host.agent_bandwidth(stale, now))
        # A slow agent: three of its intervals count.
        slow = self.write({'version': 1, 'time': now - 100, 'interval': 60,
                           'host': {'mbm_total_bps': 1.5e9}})
        self.assertEqual(1.5e9, host.agent_bandwidth(slow, now))
        self.assertIsNone(host.agent_bandwidth('/nonexistent', now))
        no_value = self.write({'version': 1, 'time': now, 'host': {}})
        self.assertIsNone(host.agent_bandwidth(no_value, now))
        bad = self.write({'version': 1, 'time': now, 'host': 'x'})
        self.assertIsNone(host.agent_bandwidth(bad, now))
