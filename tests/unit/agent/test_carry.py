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

"""Counter baselines carried from one agent to the next."""

import json
import os

import fixtures

from rdt_virt.agent import carry
from rdt_virt.agent import sampler
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info
from tests import base

TOTAL, LOCAL = info.MBM_TOTAL_BYTES, info.MBM_LOCAL_BYTES
BOOT = '0b7e5a5e-1c1b-4d4e-9d3c-2f1e0a9b8c7d'
SOURCE = ('mon', 'rdtvirt-m-u1', 0)


def reading(at, total, local, source=SOURCE):
    values = {TOTAL: fs.MonValue(total, None),
              LOCAL: fs.MonValue(local, None)}
    return sampler.Reading(source=source, time=at,
                           values={0: values, 1: values})


def through_json(doc):
    return json.loads(json.dumps(doc))


class TestCarry(base.TestCase):

    def carried(self, exported, saved=100.0, boot=BOOT):
        doc = through_json(carry.document(exported, boot, saved))
        return carry.usable(doc, BOOT, now=110.0)

    def test_the_next_agent_has_a_rate_at_its_first_reading(self):
        old = sampler.RateTracker()
        old.update('u1', reading(100.0, 1000, 400))
        entries, reason = self.carried(old.export())
        self.assertIsNone(reason)
        new = sampler.RateTracker()
        # The new agent adopted the group: generation 0 again.
        self.assertTrue(carry.matches(entries['u1'], SOURCE))
        new.seed('u1', SOURCE, entries['u1']['counters'])
        rates = new.update('u1', reading(120.0, 3000, 1400))
        # Two domains, each 2000 bytes in 20 s.
        self.assertEqual(200.0, rates.mbm_total_bps)
        self.assertEqual(100.0, rates.mbm_local_bps)
        self.assertIsNone(rates.reason)

    def test_a_counter_that_shrank_gives_no_rate(self):
        # The group was made again under its name while no agent ran.
        old = sampler.RateTracker()
        old.update('u1', reading(100.0, 5000, 400))
        entries, _ = self.carried(old.export())
        new = sampler.RateTracker()
        new.seed('u1', SOURCE, entries['u1']['counters'])
        rates = new.update('u1', reading(120.0, 300, 100))
        self.assertIsNone(rates.mbm_total_bps)
        self.assertEqual(sampler.R_RESET, rates.reason)

    def test_a_jump_above_the_ceiling_gives_no_rate(self):
        old = sampler.RateTracker()
        old.update('u1', reading(100.0, 1000, 400))
        entries, _ = self.carried(old.export())
        new = sampler.RateTracker(ceiling=1e9)
        new.seed('u1', SOURCE, entries['u1']['counters'])
        rates = new.update('u1', reading(101.0, 2 ** 50, 2 ** 49))
        self.assertIsNone(rates.mbm_total_bps)
        self.assertEqual(sampler.R_JUMP, rates.reason)

    def test_only_the_same_group_adopted_as_it_was(self):
        entry = {'source': ['mon', 'rdtvirt-m-u1', 3], 'counters': []}
        # The old agent's generation does not matter; the new one's does.
        self.assertTrue(carry.matches(entry, SOURCE))
        self.assertFalse(carry.matches(entry, ('mon', 'rdtvirt-m-u1', 1)))
        self.assertFalse(carry.matches(entry, ('mon', 'rdtvirt-m-u2', 0)))
        self.assertFalse(carry.matches(entry, ('rdtvirt-mb10',
                                               'rdtvirt-mb10', 0)))

    def test_refused(self):
        exported = {'u1': {'source': list(SOURCE), 'counters': []}}
        for doc, now, why in (
                (carry.document(exported, 'another boot', 100.0), 110.0,
                 'written before the last boot'),
                (carry.document(exported, BOOT, 100.0), 100.0 +
                 carry.MAX_AGE + 1, 'older than'),
                # A clock that went back: another boot's, whatever it says.
                (carry.document(exported, BOOT, 100.0), 99.0, 'older than'),
                (dict(carry.document(exported, BOOT, 100.0), version=2),
                 110.0, 'unknown version'),
                ([], 110.0, 'unknown version')):
            entries, reason = carry.usable(through_json(doc), BOOT, now)
            self.assertEqual({}, entries)
            self.assertIn(why, reason)
        # Without a boot id of its own the agent takes nothing.
        self.assertEqual({}, carry.usable(carry.document(
            exported, BOOT, 100.0), None, 110.0)[0])

    def test_malformed_entries_are_left_out(self):
        good = {'source': list(SOURCE), 'counters': [[0, TOTAL, 1, 2.0]]}
        entries, reason = carry.usable(carry.document({
            'u1': good, 'u2': {'source': ['x']},
            'u3': {'source': list(SOURCE), 'counters': [[0, TOTAL, 'a', 1]]},
            'u4': 'text'}, BOOT, 100.0), BOOT, 110.0)
        self.assertIsNone(reason)
        self.assertEqual({'u1': good}, entries)

    def test_taken_once(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'state.json.baselines')
        self.assertIsNone(carry.take(path))
        doc = carry.document({}, BOOT, 1.0)
        carry.save(path, doc)
        self.assertEqual(doc, carry.take(path))
        self.assertFalse(os.path.exists(path))
        with open(path, 'w') as f:
            f.write('{not json')
        self.assertIsNone(carry.take(path))
        self.assertFalse(os.path.exists(path))
