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
import tempfile

from rdt_virt.agent import state
from tests import base


class TestStateFile(base.TestCase):

    def setUp(self):
        super().setUp()
        self.path = os.path.join(tempfile.mkdtemp(), 'sub', 'state.json')

    def test_round_trip_and_replace(self):
        state.write(self.path, {'time': 100.0, 'instances': {'a': {}}})
        self.assertEqual({'version': 1, 'time': 100.0,
                          'instances': {'a': {}}}, state.read(self.path))
        state.write(self.path, {'time': 101.0, 'instances': {}})
        self.assertEqual(101.0, state.read(self.path)['time'])
        # Only the document is left behind, no temporary files.
        self.assertEqual(['state.json'],
                         os.listdir(os.path.dirname(self.path)))

    def test_stale_missing_and_corrupt(self):
        self.assertIsNone(state.read(self.path))
        state.write(self.path, {'time': 100.0})
        self.assertIsNotNone(state.read(self.path, max_age=60, now=150.0))
        self.assertIsNone(state.read(self.path, max_age=60, now=161.0))
        with open(self.path, 'w') as f:
            f.write('{"version": 1, "ti')
        self.assertIsNone(state.read(self.path))
        with open(self.path, 'w') as f:
            json.dump({'version': 2, 'time': 1}, f)
        self.assertIsNone(state.read(self.path))

    def test_failed_write_keeps_old_document(self):
        state.write(self.path, {'time': 1.0})
        self.assertRaises(TypeError, state.write, self.path,
                          {'time': object()})
        self.assertEqual(1.0, state.read(self.path)['time'])
        self.assertEqual(['state.json'],
                         os.listdir(os.path.dirname(self.path)))
