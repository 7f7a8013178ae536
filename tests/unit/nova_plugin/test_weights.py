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

from nova.scheduler import weights as nova_weights
from nova.weights import WeighedObject

from nova_plugin.scheduler import weights
from tests import base
from tests.unit.nova_plugin import fakes


class TestRDTWeigher(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fakes.SchedulerState())
        self.weigher = weights.RDTWeigher()

    def weigh(self, hosts, extra_specs):
        """Host names, best first, through Nova's weight handler."""
        weighed = nova_weights.HostWeightHandler().get_weighed_objects(
            [self.weigher], hosts, fakes.request_spec(extra_specs))
        return [w.obj.host for w in weighed], [w.weight for w in weighed]

    def raw(self, hosts, extra_specs):
        return self.weigher.weigh_objects(
            [WeighedObject(h, 0.0) for h in hosts],
            fakes.request_spec(extra_specs))

    def test_plain_requests_weigh_the_same_everywhere(self):
        hosts = [fakes.host_state('a', fakes.stats(closids=1)),
                 fakes.host_state('b', fakes.stats(closids=6, mbw=1e9)),
                 fakes.host_state('c', None)]
        self.assertEqual([0.0, 0.0, 0.0], self.raw(hosts, {}))
        self.assertEqual([0.0, 0.0, 0.0],
                         self.raw(hosts, {'hw:rdt_monitor': 'false'}))
        names, scores = self.weigh(hosts, {'hw:numa_nodes': '1'})
        self.assertEqual({0.0}, set(scores))

    def test_prefers_closid_headroom(self):
        hosts = [fakes.host_state('a', fakes.stats(closids=2)),
                 fakes.host_state('b', fakes.stats(closids=6)),
                 fakes.host_state('c', fakes.stats(closids=4))]
        names, _ = self.weigh(hosts, {'hw:mem_bw': '10'})
        self.assertEqual(['b', 'c', 'a'], names)

    def test_prefers_way_headroom(self):
        hosts = [fakes.host_state('a', fakes.stats(free_ways=0b11)),
                 fakes.host_state('b', fakes.stats(free_ways=0b1111110)),
                 fakes.host_state('c', fakes.stats(free_ways=0b1011))]
        names, _ = self.weigh(hosts, {'hw:cache_l3': '4096'})
        self.assertEqual('b', names[0])

    def test_prefers_low_bandwidth(self):
        hosts = [fakes.host_state('busy', fakes.stats(mbw=9e9)),
                 fakes.host_state('idle', fakes.stats(mbw=1e8)),
                 fakes.host_state('half', fakes.stats(mbw=4e9))]
        names, _ = self.weigh(hosts, {'hw:mem_bw': '10'})
        self.assertEqual(['idle', 'half', 'busy'], names)
        # Without a measurement a host counts as the average. Headroom is
        # 6/7 everywhere (7 free CLOSIDs of 7, one taken).
        raw = self.raw([fakes.host_state('x', fakes.stats(mbw=8e9)),
                        fakes.host_state('y', fakes.stats(mbw=4e9)),
                        fakes.host_state('z', fakes.stats())],
                       {'hw:mem_bw': '10'})
        for expected, got in zip([6 / 7 - 1, 6 / 7 - 0.5, 6 / 7 - 0.75],
                                 raw):
            self.assertAlmostEqual(expected, got)

    def test_high_requests_keep_high_instances_apart(self):
        hosts = [fakes.host_state('two', fakes.stats(
                     classes={0: (2, 0), 1: (1, 3)})),
                 fakes.host_state('none', fakes.stats(
                     classes={0: (0, 5), 1: (0, 5)})),
                 fakes.host_state('one', fakes.stats(
                     classes={0: (1, 0), 1: (0, 0)}))]
        names, _ = self.weigh(hosts, {'hw:rdt_priority': 'high'})
        self.assertEqual(['none', 'one', 'two'], names)
        # The domain with the most counts; headroom is 1 without a new
        # control group (no cap) and the same RMID headroom everywhere.
        raw = self.raw(hosts, {'hw:rdt_priority': 'high'})
        base_ = raw[1]
        self.assertAlmostEqual(base_ - 1.0, raw[0])
        self.assertAlmostEqual(base_ - 0.5, raw[2])

    def test_low_requests_go_where_there_is_bandwidth(self):
        hosts = [fakes.host_state('protected', fakes.stats(
                     mbw=1e9, classes={0: (2, 0), 1: (2, 0)})),
                 fakes.host_state('busy', fakes.stats(mbw=8e9)),
                 fakes.host_state('free', fakes.stats(
                     mbw=1e9, classes={0: (0, 4), 1: (0, 4)}))]
        names, _ = self.weigh(hosts, {'hw:rdt_priority': 'low'})
        self.assertEqual('free', names[0])
        self.assertEqual('protected', names[-1])

    def test_normal_requests_ignore_the_classes(self):
        hosts = [fakes.host_state('a', fakes.stats(
                     classes={0: (3, 0), 1: (3, 0)})),
                 fakes.host_state('b', fakes.stats())]
        a, b = self.raw(hosts, {'hw:mem_bw': '10'})
        self.assertAlmostEqual(a, b)
        self.assertEqual([0.0, 0.0],
                         self.raw(hosts, {'hw:rdt_priority': 'normal'}))

    def test_multi_create_spreads_high_instances(self):
        # Two hosts alike; the first high instance lands on one (Nova
        # counts num_instances up), the next request sees it there.
        hosts = [fakes.host_state('a', fakes.stats()),
                 fakes.host_state('b', fakes.stats())]
        for hs in hosts:
            hs.num_instances = 3
        request = fakes.request_spec({'hw:rdt_priority': 'high'})
        first = self.weigher.weigh_objects(
            [WeighedObject(h, 0.0) for h in hosts], request)
        self.assertAlmostEqual(first[0], first[1])
        hosts[0].num_instances = 4
        second = self.weigher.weigh_objects(
            [WeighedObject(h, 0.0) for h in hosts],
            fakes.request_spec({'hw:rdt_priority': 'high'}))
        self.assertLess(second[0], second[1])

    def test_multiplier_from_config_and_aggregate(self):
        host = fakes.host_state('a', fakes.stats())
        self.raw([host], {'hw:mem_bw': '10'})
        self.assertEqual(1.0, self.weigher.weight_multiplier(host))
        self.flags(rdt_weight_multiplier=-2.0, group='filter_scheduler')
        self.raw([host], {'hw:mem_bw': '10'})
        self.assertEqual(-2.0, self.weigher.weight_multiplier(host))
        host.aggregates = [fakes.aggregate(rdt_weight_multiplier='3.5')]
        self.assertEqual(3.5, self.weigher.weight_multiplier(host))

    def test_negative_multiplier_packs(self):
        self.flags(rdt_weight_multiplier=-1.0, group='filter_scheduler')
        hosts = [fakes.host_state('a', fakes.stats(closids=2)),
                 fakes.host_state('b', fakes.stats(closids=6))]
        names, _ = self.weigh(hosts, {'hw:mem_bw': '10'})
        self.assertEqual(['a', 'b'], names)
