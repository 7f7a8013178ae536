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

"""The flow's summary says where its time went, step by step."""

import os
from unittest import mock

import fixtures

from rdt_virt.cloud import flow as flow_mod
from tests import base


def commanding_flow(test):
    """A Flow without a cloud that runs commands, in a temporary dir."""
    flow = flow_mod.Flow.__new__(flow_mod.Flow)
    flow.out, flow.env, flow.commands = lambda line: None, {}, []
    flow.work = test.useFixture(fixtures.TempDir()).path
    flow.current, flow.started = '', flow_mod.time.monotonic()
    return flow


class TestSummary(base.TestCase):

    def test_each_step_and_the_total(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        lines = []
        flow.out, flow.times, flow.waits = lines.append, [], []
        flow.commands = []
        clock = iter([10.0, 12.5, 20.0, 81.0])
        with mock.patch.object(flow_mod.time, 'monotonic',
                               lambda: next(clock)):
            flow.step('Short', lambda: None)
            # Two commands, of 1.5 and 40 s.
            flow.step('A longer step',
                      lambda: flow.commands.extend([(1.5, 'a'), (40.0, 'b')]))
        self.assertIn('   (61 s; 2 commands took 42 s)', lines)
        flow.summary()
        table = lines[lines.index('\n== Time per step (seconds; commands '
                                  'run, their seconds) ==') + 1:]
        self.assertEqual(['  Short             2 s    0     0 s',
                          '  A longer step    61 s    2    42 s',
                          '  flow             64 s    2    42 s',
                          '\n== Slowest commands ==',
                          '     40 s  b',
                          '      2 s  a'], table)

    def test_a_command_is_timed(self):
        flow = commanding_flow(self)
        flow.current = 'A step'
        self.assertEqual((0, 'x\n'), flow.sh('echo', 'x'))
        self.assertEqual(1, len(flow.commands))
        self.assertGreater(flow.commands[0][0], 0.0)
        self.assertEqual('echo x', flow.commands[0][1])
        flow.sh('sh', '-c', 'exit 3', check=False, show=False)
        with open(os.path.join(flow.work, 'commands.tsv')) as f:
            rows = [line.rstrip('\n').split('\t') for line in f]
        self.assertEqual([['0', 'A step', 'echo x'],
                          ['3', 'A step', 'sh -c exit 3']],
                         [row[2:] for row in rows])
        self.assertEqual('%.2f' % flow.commands[0][0], rows[0][1])
        self.assertLessEqual(0.0, float(rows[0][0]))
        self.assertLessEqual(float(rows[0][0]), float(rows[1][0]))

    def test_a_failed_step_is_not_counted(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        flow.out, flow.times, flow.waits = lambda line: None, [], []
        flow.commands = []

        def fails():
            raise flow_mod.FlowError('no')
        self.assertRaises(flow_mod.FlowError, flow.step, 'Fails', fails)
        self.assertEqual([], flow.times)

    def test_the_longest_waits(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        lines = []
        flow.out, flow.times, flow.waits = lines.append, [], []
        flow.commands = []
        answers = iter([None, None, 'done', 'at once'])
        # Each wait: its start, then a reading after each check.
        clock = iter([0.0, 1.0, 5.0, 42.0, 50.0, 50.5])
        with mock.patch.object(flow_mod.time, 'monotonic',
                               lambda: next(clock)), \
                mock.patch.object(flow_mod.time, 'sleep', lambda s: None):
            self.assertEqual('done', flow.wait('long', lambda: next(answers)))
            self.assertEqual('at once', flow.wait(
                'short', lambda: next(answers)))
        self.assertEqual([('long', 42.0)], flow.waits)
        self.assertIn('   (42 s waiting for long)', lines)
        flow.times = [('Step', 60.0, 3, 9.0)]
        flow.summary()
        self.assertEqual(['  Step    60 s    3     9 s',
                          '  flow    60 s    3     9 s',
                          '\n== Longest waits ==', '     42 s  long'],
                         lines[lines.index('\n== Time per step (seconds; '
                                           'commands run, their seconds) '
                                           '==') + 1:])

    def test_the_slowest_commands(self):
        flow = flow_mod.Flow.__new__(flow_mod.Flow)
        lines = []
        flow.out, flow.waits = lines.append, []
        flow.times = [('Step', 60.0, 12, 30.0)]
        flow.commands = [
            (float(i), '/venv/bin/openstack server show s-%d' % i)
            for i in range(12)]
        flow.commands.append((4.5, '/venv/bin/openstack server create '
                                   + '--property x=y ' * 10 + 'big'))
        flow.summary()
        slowest = lines[lines.index('\n== Slowest commands ==') + 1:]
        # The ten slowest, slowest first, named by their program's name;
        # a long one cut.
        self.assertEqual(10, len(slowest))
        self.assertEqual('     11 s  openstack server show s-11', slowest[0])
        self.assertEqual('      3 s  openstack server show s-3', slowest[-1])
        long, = [line for line in slowest if 'create' in line]
        self.assertTrue(long.endswith('...'), long)
        self.assertEqual(flow_mod.COMMAND_SHOWN, len(long[len('  %5.0f s  '
                                                              % 4.5):]))


class TestTraced(base.TestCase):
    """A failed command's request IDs are looked up in the services' logs."""

    ID = 'req-1e42563d-72fe-4b28-bc02-5ae914ba3945'

    def setUp(self):
        super().setUp()
        self.logs = self.useFixture(fixtures.TempDir()).path
        for name, lines in (
                ('nova-api.log', ['INFO other req-00000000-0000-0000-0000-'
                                  '000000000000 GET /', 'INFO %s GET /v2.1/'
                                  'servers status: 400' % self.ID]),
                ('glance-api.log', ['nothing here']),
                ('notes.txt', [self.ID])):
            with open(os.path.join(self.logs, name), 'w') as f:
                f.write('\n'.join(lines) + '\n')

    def test_the_lines_of_each_id(self):
        text = 'Unrecognized schema in response body. (HTTP 400) ' \
            '(Request-ID: %s)' % self.ID
        self.assertEqual(
            '%s in the services\' logs:\n'
            '  nova-api.log: INFO %s GET /v2.1/servers status: 400\n'
            % (self.ID, self.ID), flow_mod.traced(text, self.logs))

    def test_an_id_logged_nowhere_says_so(self):
        other = 'req-11111111-2222-3333-4444-555555555555'
        self.assertEqual('%s in the services\' logs:\n  (nowhere)\n' % other,
                         flow_mod.traced('failed (%s)' % other, self.logs))

    def test_no_id_no_trace(self):
        self.assertEqual('', flow_mod.traced('exit 1', self.logs))
        self.assertEqual('', flow_mod.traced(self.ID, self.logs + '/gone'))

    def test_limit(self):
        with open(os.path.join(self.logs, 'nova-api.log'), 'a') as f:
            f.write(('%s again\n' % self.ID) * 30)
        lines = flow_mod.traced(self.ID, self.logs, limit=3).splitlines()
        self.assertEqual(4, len(lines))

    def test_a_failed_command_carries_the_trace(self):
        flow = commanding_flow(self)
        flow.cloud = mock.Mock()
        flow.cloud.daemons.log_dir = self.logs
        err = self.assertRaises(flow_mod.FlowError, flow.sh, 'sh', '-c',
                                'echo "(Request-ID: %s)"; exit 1' % self.ID)
        self.assertIn('nova-api.log: INFO %s GET' % self.ID, str(err))


class TestUndeleted(base.TestCase):

    def test_a_server_that_reads_deleted_is_not_deleted_again(self):
        # As ``server list`` showed them 0.5 s after ``server delete
        # --wait low-1 low-2`` had returned.
        servers = [{'Name': 'low-2', 'Status': 'DELETED'},
                   {'Name': 'low-1', 'Status': 'DELETED'},
                   {'Name': 'protected', 'Status': 'ACTIVE'},
                   {'Name': 'noisy-1', 'Status': 'ERROR'}]
        self.assertEqual(['protected', 'noisy-1'],
                         flow_mod.undeleted(servers))
        self.assertEqual([], flow_mod.undeleted(servers[:2]))
