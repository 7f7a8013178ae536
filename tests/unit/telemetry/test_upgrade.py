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

"""The pollsters read the state file of an agent one release older or newer.

ceilometer-polling and rdt-virt-agent restart one after the other on a
compute host, so for a while each reads the other release's state file.
"""

import json
import os
import time

import fixtures

from tests import base
from tests.unit.telemetry import test_pollsters

UPGRADE = os.path.join(base.FIXTURES_DIR, 'upgrade')


class TestPollstersAcrossReleases(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            from rdt_virt.telemetry import pollsters
        except ImportError:
            self.skipTest('ceilometer is not installed')
        from ceilometer import service
        self.pollsters = pollsters
        self.conf = service.prepare_service([], [])
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'state.json')
        # A pollster registers [rdt] on Ceilometer's configuration.
        pollsters.CPUL3CachePollster(self.conf)
        self.conf.set_override('state_file', self.path, 'rdt')
        with open(os.path.join(UPGRADE, 'agent-state-v1.json')) as f:
            self.doc = json.load(f)
        # The released document, as if written just now.
        self.doc['time'] = time.time()

    def write(self, doc):
        with open(self.path, 'w') as f:
            json.dump(doc, f)

    def values(self, cls):
        servers = [test_pollsters.Server(u) for u in self.doc['instances']]
        return {s.resource_id: (s.volume, s.resource_metadata['rdt_level'])
                for s in cls(self.conf).get_samples(None, {}, servers)}

    def test_older_and_newer_with_added_fields(self):
        self.write(self.doc)
        older = self.values(self.pollsters.MemoryBandwidthTotalPollster)
        self.assertEqual(
            {u: (e['mbm_total_bps'], e['level'])
             for u, e in self.doc['instances'].items()}, older)
        newer = json.loads(json.dumps(self.doc))
        newer['host']['future'] = 1
        newer['host']['controller']['future'] = {}
        for entry in newer['instances'].values():
            entry['future_bps'] = 3.0
        self.write(newer)
        self.assertEqual(older, self.values(
            self.pollsters.MemoryBandwidthTotalPollster))

    def test_another_version_gives_no_samples(self):
        self.write(dict(self.doc, version=2))
        for cls in (self.pollsters.MemoryBandwidthTotalPollster,
                    self.pollsters.CPUL3CachePollster,
                    self.pollsters.MemoryBandwidthLimitPollster):
            self.assertEqual({}, self.values(cls))
        # The same file at version 1 gives them.
        self.write(self.doc)
        self.assertNotEqual({}, self.values(
            self.pollsters.CPUL3CachePollster))
