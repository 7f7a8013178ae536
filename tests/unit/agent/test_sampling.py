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

"""A sample's host part: what the host's resctrl offers, and the totals
the Prometheus endpoint serves; how a sample reads the counter files."""

import errno
import os
from unittest import mock

from rdt_virt.agent import model
from rdt_virt.agent import sampling
from rdt_virt import exception
from rdt_virt.resctrl import fs
from tests import base
from tests.unit.agent import test_executor
from tests.unit.resctrl import test_fs
from tests.unit.resctrl import variants

MonValue = fs.MonValue


class TestSample(test_fs.ResctrlTestCase):

    def agent(self, variant):
        from rdt_virt.cmd import agent as agent_cmd
        rc = self.make(variant)
        state = os.path.join(self.useFixture(base.fixtures.TempDir()).path,
                             'state.json')
        self.flags(resctrl_root=rc.root, state_file=state, group='rdt')
        agent = agent_cmd.build_agent(source=object(), proc=object(),
                                      api=test_executor.FakeAPI())
        agent.caps = rc.capabilities()
        return agent

    def test_whether_the_host_offers_mba(self):
        self.assertIs(True, self.agent('reference').sample()['host']['mba'])
        self.assertIs(False,
                      self.agent('monitoring').sample()['host']['mba'])

    def test_not_known_while_resctrl_is_not_mounted(self):
        agent = self.agent('reference')
        agent.caps = None
        self.assertNotIn('mba', agent.sample()['host'])

    def test_totals_carry_the_refused_writes(self):
        from rdt_virt.cmd import agent as agent_cmd
        agent = self.agent('reference')
        agent.executor.failures['refused'] += 2
        totals = agent_cmd.agent_totals(agent)
        self.assertEqual(2, totals['write_failures']['refused'])
        self.assertEqual(0, totals['write_failures']['busy'])
        self.assertEqual(0, totals['ticks'])
        self.assertIn('tick_cpu', totals)

    def test_paths_of_groups_no_longer_sampled_are_dropped(self):
        agent = self.agent('reference')
        uuid = variants.UUID_D
        agent.instances = {uuid: model.Instance(uuid, 'instance-d', 1,
                                                monitor=True)}
        agent.placements = {uuid: model.Placement(
            uuid, None, variants.MON_D, (None, variants.MON_D))}
        agent.sample()
        io = CountingIO(self)
        agent.sample()
        self.assertEqual(6, len([p for p in io.opened if '/mon_data/' in p]))
        paths = agent.sampling._paths
        self.assertEqual([((None, variants.MON_D),)],
                         [k[:1] for k in paths])
        agent.placements = {}
        agent.sample()
        agent.sample()
        self.assertEqual({}, agent.sampling._paths)
        self.assertEqual({}, agent.sampling._paths_before)


class CountingIO(object):
    """os.open and os.read that count their calls (``fail``: errnos)."""

    def __init__(self, test, fail=None):
        self.opened = []
        self.reads = 0
        self.fail = fail or {}
        real_open, real_read = os.open, os.read

        def fake_open(path, *args, **kwargs):
            self.opened.append(path)
            for suffix, err in self.fail.items():
                if path.endswith(suffix):
                    raise OSError(err, os.strerror(err))
            return real_open(path, *args, **kwargs)

        def fake_read(fd, size):
            self.reads += 1
            return real_read(fd, size)

        test.useFixture(base.fixtures.MonkeyPatch('os.open', fake_open))
        test.useFixture(base.fixtures.MonkeyPatch('os.read', fake_read))


class TestReadSmall(base.TestCase):

    def check(self, data, reads):
        path = os.path.join(self.useFixture(base.fixtures.TempDir()).path,
                            'counter')
        with open(path, 'wb') as f:
            f.write(data)
        io = CountingIO(self)
        self.assertEqual(data, sampling.read_small(path))
        self.assertEqual(reads, io.reads, data)

    def test_a_line_is_one_read(self):
        # A counter: kernfs gives the whole line to the first read.
        self.check(b'12386304\n', 1)
        self.check(b'Unavailable\n', 1)
        self.check(b'', 1)

    def test_anything_else_is_read_until_eof(self):
        self.check(b'12386304', 2)
        self.check(b'1\n2\n', 2)
        long_line = b'9' * (3 * sampling.READ_SIZE) + b'\n'
        self.check(long_line, 5)
        # A line exactly as long as one read might go on.
        self.check(b'9' * (sampling.READ_SIZE - 1) + b'\n', 2)


class TestCounterReads(test_fs.ResctrlTestCase):
    """Sampling reads each counter file once, as the kernel answers."""

    COUNTERS = (None, variants.MON_D)

    def setUp(self):
        super().setUp()
        self.rc = self.make('reference')
        self.caps = self.rc.capabilities()
        source = mock.Mock(source_key=lambda counters: counters)
        self.sampling = sampling.Sampling(None, self.rc, source,
                                          clock=iter(range(10 ** 6)).__next__,
                                          wall=None)

    def write(self, dom, event, text):
        self.tree.write(text, 'mon_groups', variants.MON_D, 'mon_data',
                        'mon_L3_%02d' % dom, event)

    def test_each_file_opened_and_read_once(self):
        io = CountingIO(self)
        reading = self.sampling.read_counters(self.caps, self.COUNTERS)
        self.assertEqual(6, len(io.opened))
        self.assertEqual(6, io.reads)
        # The same values as the text reader of resctrl.fs, timed each.
        self.assertEqual(self.rc.read_mon_data(None, variants.MON_D),
                         reading.values)
        # The clock ticks before and after each read: 0 and 1 for the
        # first file, 10 and 11 for the last; 12 for the reading.
        self.assertEqual(0.5, reading.time_of(0, 'llc_occupancy'))
        self.assertEqual(10.5, reading.time_of(1, 'mbm_total_bytes'))
        self.assertEqual(12, reading.time)

    def test_what_the_kernel_may_answer(self):
        self.write(0, 'mbm_total_bytes', 'Unavailable\n')
        self.write(0, 'mbm_local_bytes', 'Error\n')
        self.write(0, 'llc_occupancy', 'Unassigned\n')
        self.write(1, 'mbm_total_bytes', ' 42\n')
        self.write(1, 'llc_occupancy', '\u0663\n')
        CountingIO(self, fail={'mon_L3_01/mbm_local_bytes': errno.EBUSY})
        values = self.sampling.read_counters(self.caps, self.COUNTERS).values
        self.assertEqual(
            {0: {'mbm_total_bytes': MonValue(None, 'Unavailable'),
                 'mbm_local_bytes': MonValue(None, 'Error'),
                 'llc_occupancy': MonValue(None, 'Unassigned')},
             1: {'mbm_total_bytes': MonValue(42, None),
                 'mbm_local_bytes': MonValue(None,
                                             os.strerror(errno.EBUSY)),
                 'llc_occupancy': MonValue(None, "unparsable '\u0663'")}},
            values)

    def test_a_file_or_a_group_gone(self):
        os.unlink(self.tree.path('mon_groups', variants.MON_D, 'mon_data',
                                 'mon_L3_01', 'llc_occupancy'))
        values = self.sampling.read_counters(self.caps, self.COUNTERS).values
        self.assertNotIn('llc_occupancy', values[1])
        self.assertIn('llc_occupancy', values[0])
        # The paths are kept between samples, the group is not.
        os.rename(self.tree.path('mon_groups', variants.MON_D),
                  self.tree.path('mon_groups', 'rdtvirt-m-other'))
        self.assertRaises(exception.GroupNotFound,
                          self.sampling.read_counters, self.caps,
                          self.COUNTERS)

    def test_domains_and_events_follow_the_capabilities(self):
        self.sampling.read_counters(self.caps, self.COUNTERS)
        mon = self.caps.monitor.__class__(
            num_rmids=8, features=frozenset(['mbm_total_bytes']),
            max_threshold_occupancy=0, domain_ids=(1,))
        caps = self.caps.__class__(monitor=mon)
        io = CountingIO(self)
        values = self.sampling.read_counters(caps, self.COUNTERS).values
        self.assertEqual([1], list(values))
        self.assertEqual(['mbm_total_bytes'], list(values[1]))
        self.assertEqual(1, len(io.opened))
