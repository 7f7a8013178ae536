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
import stat
import tempfile
import time

import fixtures

from rdt_virt.agent import state
from rdt_virt import exception
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


def agent_document():
    """A document as the agent writes it, two instances."""
    inst = {'name': 'instance-1', 'domain': 'instance-1',
            'group': 'rdtvirt-mb10', 'mon_group': 'rdtvirt-m-a',
            'counters': 'rdtvirt-mb10/rdtvirt-m-a',
            'policy': {'mem_bw': 10}, 'mbm_total_bps': 1.5e8,
            'mbm_local_bps': 1.2e8, 'llc_occupancy_bytes': 4194304,
            'reason': None}
    return {'time': 1000.0, 'interval': 10.0,
            'host': {'mbm_total_bps': 3e8, 'rmids_total': 176,
                     'rmids_used': 2, 'coverage': 1.0},
            'instances': {'a': dict(inst), 'b': dict(inst, name='i-2')}}


class TestHostileStateFile(base.TestCase):
    """Readers survive truncated, hostile and misplaced state files."""

    def setUp(self):
        super().setUp()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, 'state.json')

    def put(self, text, mode=0o644):
        with open(self.path, 'w') as f:
            f.write(text)
        os.chmod(self.path, mode)

    def test_written_mode_and_replacement(self):
        state.write(self.path, agent_document())
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.path).st_mode))
        self.assertEqual(agent_document()['instances'],
                         state.read(self.path)['instances'])

    def test_every_truncation_refused(self):
        state.write(self.path, agent_document())
        with open(self.path) as f:
            text = f.read()
        for end in range(len(text)):
            self.assertRaises(exception.InvalidStateFile, state.parse,
                              text[:end])
            self.put(text[:end])
            self.assertIsNone(state.read(self.path))

    def test_document_refused_as_a_whole(self):
        good = agent_document()
        good['version'] = 1
        for bad in ([], 'x', 1, None,
                    dict(good, version=2), dict(good, version=True),
                    dict(good, version='1'),
                    dict(good, time='100'), dict(good, time=-1),
                    dict(good, time=None), {'version': 1},
                    dict(good, interval='10'), dict(good, host=[]),
                    dict(good, instances=[]), dict(good, instances='x')):
            self.assertRaises(exception.InvalidStateFile, state.parse,
                              json.dumps(bad))
        for text in ('{"version": 1, "time": NaN}',
                     '{"version": 1, "time": Infinity}',
                     '{"version": 1, "time": 1e999}',
                     '[' * 100000 + ']' * 100000, '\x00', ''):
            self.assertRaises(exception.InvalidStateFile, state.parse, text)

    def test_bad_values_become_null(self):
        doc = agent_document()
        doc['version'] = 1
        a = doc['instances']['a']
        a.update(mbm_total_bps='1e9', mbm_local_bps=-5,
                 llc_occupancy_bytes=True, name=['x'], group=7,
                 policy='mem_bw=10')
        doc['instances']['c'] = 'not an object'
        doc['host']['mbm_total_bps'] = {'x': 1}
        text = json.dumps(doc).replace('4194304', '1e999', 1)
        parsed = state.parse(text)
        self.assertEqual({'a', 'b'}, set(parsed['instances']))
        a = parsed['instances']['a']
        for key in ('mbm_total_bps', 'mbm_local_bps', 'llc_occupancy_bytes',
                    'name', 'group'):
            self.assertIsNone(a[key], key)
        self.assertEqual({}, a['policy'])
        self.assertIsNone(parsed['host']['mbm_total_bps'])
        # The other instance keeps its values.
        self.assertEqual(1.5e8, parsed['instances']['b']['mbm_total_bps'])

    def test_project_id_is_optional(self):
        # An older agent's document has no project_id: read as it is.
        older = agent_document()
        state.write(self.path, older)
        parsed = state.read(self.path)
        self.assertNotIn('project_id', parsed['instances']['a'])
        self.assertEqual(older['instances'], parsed['instances'])
        # This agent's document has it, text or null, in version 1.
        newer = agent_document()
        newer['instances']['a']['project_id'] = 'f1a2b3c4d5e6'
        newer['instances']['b']['project_id'] = None
        state.write(self.path, newer)
        parsed = state.read(self.path)
        self.assertEqual(1, parsed['version'])
        self.assertEqual(newer['instances'], parsed['instances'])
        # Not text: null, like every text field; the rest stays.
        newer['instances']['a']['project_id'] = {'id': 'x'}
        state.write(self.path, newer)
        a = state.read(self.path)['instances']['a']
        self.assertIsNone(a['project_id'])
        self.assertEqual(1.5e8, a['mbm_total_bps'])

    def test_reader_of_the_release_before_reads_the_project(self):
        # A reader that knows no project_id (the previous release's
        # checks, which differ only in the text fields they know) keeps
        # the document and its values; the field passes through.
        self.useFixture(fixtures.MonkeyPatch(
            'rdt_virt.agent.state._TEXTS',
            tuple(k for k in state._TEXTS if k != 'project_id')))
        doc = agent_document()
        doc['instances']['a']['project_id'] = 'f1a2b3c4d5e6'
        state.write(self.path, doc)
        parsed = state.read(self.path)
        self.assertIsNotNone(parsed)
        self.assertEqual(doc['instances'], parsed['instances'])

    def test_misplaced_files_refused(self):
        state.write(self.path, agent_document())
        self.assertIsNotNone(state.read(self.path))
        os.chmod(self.path, 0o666)
        self.assertIsNone(state.read(self.path))
        os.chmod(self.path, 0o664)
        self.assertIsNone(state.read(self.path))
        os.chmod(self.path, 0o644)
        link = os.path.join(self.dir, 'link.json')
        os.symlink(self.path, link)
        self.assertIsNone(state.read(link))
        # A FIFO in its place: refused at once, not waited on.
        fifo = os.path.join(self.dir, 'fifo.json')
        os.mkfifo(fifo, 0o644)
        start = time.monotonic()
        self.assertIsNone(state.read(fifo))
        self.assertLess(time.monotonic() - start, 1.0)
        self.assertIsNone(state.read(self.dir))

    def test_oversize_refused(self):
        self.useFixture(fixtures.MonkeyPatch(
            'rdt_virt.agent.state.MAX_BYTES', 4096))
        doc = agent_document()
        doc['padding'] = 'x' * 4096
        state.write(self.path, doc)
        self.assertIsNone(state.read(self.path))
        self.put('{"version": 1, "time": 1}' + ' ' * 5000)
        self.assertIsNone(state.read(self.path))

    def test_not_utf8_refused(self):
        with open(self.path, 'wb') as f:
            f.write(b'{"version": 1, "time": 1, "x": "\xff"}')
        os.chmod(self.path, 0o644)
        self.assertIsNone(state.read(self.path))
