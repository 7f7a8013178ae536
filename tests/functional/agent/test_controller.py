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

"""The bandwidth controller on the emulated host.

Fake QEMUs whose vCPU threads burn CPU make memory traffic in the
emulator's model (CPU time x bytes per CPU second x the MBA throttle of
their control group), so a throttle really lowers what the counters of a
low-priority instance show, and the loop closes through the kernel's
files as it would on a real host.
"""

import time
import uuid as uuid_mod

from rdt_virt.agent import model
from rdt_virt.emulator import launcher as emu_launcher
from rdt_virt.emulator import profiles
from tests.functional.agent import base

P = base.PREFIX
TIMEOUT = 60.0


class ControllerCase(base.AgentTestCase):
    """Guests with protection classes, periods and waits."""

    def setUp(self):
        super().setUp()
        # A tiny configured capacity: every burning guest puts its domain
        # under pressure, whatever CPU the loaded machine gives it.
        self.flags(memory_bandwidth_capacity=0.001,
                   controller_active_threshold=1.0,
                   controller_throttle_dwell=0.0,
                   controller_release_dwell=0.0, controller_increase=20.0,
                   group='rdt_agent')
        self.agent = self.new_agent()

    def boot_classed(self, priority, burn=True, bw=None):
        uuid = str(uuid_mod.uuid4())
        self.ids += 1
        self.host.start(uuid, vcpus=1, others=0, burn=burn)
        self.source.start(model.Instance(
            uuid, 'instance-%08x' % self.ids, self.ids, bandwidth=bw,
            monitor=True, priority=priority), event=False)
        return uuid

    def period(self):
        time.sleep(1.0)
        doc = self.agent.sample()
        if self.agent.full_requested:
            self.agent.tick()
        return doc

    def until(self, check, what):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            doc = self.period()
            if check(doc):
                return doc
        self.fail('%s not reached in %.0f s; last document: %s' % (
            what, TIMEOUT, doc))

    @staticmethod
    def level(doc, uuid):
        return doc['instances'][uuid]['level']


class TestController(ControllerCase):

    def test_level_published_with_the_group_it_is_in_force_in(self):
        # The controller decides at a sample and the next tick moves the
        # threads: every document in between shows the level of the
        # group it names, and the decision as level_next.
        self.boot_classed('high')
        low = self.boot_classed('low')
        self.agent.tick()
        deadline = time.monotonic() + TIMEOUT
        seen_next = False
        while time.monotonic() < deadline:
            time.sleep(1.0)
            inst = self.agent.sample()['instances'][low]
            level = inst['level']
            self.assertEqual(P + 'mb%d' % level if level else None,
                             inst['group'], inst)
            seen_next = seen_next or 'level_next' in inst
            if self.agent.full_requested:
                self.agent.tick()
            if level == 10:
                break
        self.assertEqual(10, level)
        self.assertTrue(seen_next)

    def test_throttle_restart_release(self):
        high = self.boot_classed('high')
        lows = [self.boot_classed('low'),
                self.boot_classed('low', bw=base.shared(60))]
        normal = self.boot_classed('normal', bw=base.shared(30))
        self.agent.tick()
        self.assertPlaced(lows[0], None)
        self.assertPlaced(lows[1], P + 'mb60')
        self.period()
        # The tiny capacity saturates the pool: every active low guest to
        # the floor (the host's minimum, 10%) at once.
        doc = self.until(lambda d: all(self.level(d, u) == 10
                                       for u in lows), 'floor')
        for uuid in lows:
            self.assertPlaced(uuid, P + 'mb10')
            self.assertEqual('low', doc['instances'][uuid]['priority'])
        self.assertPlaced(high, None)
        self.assertPlaced(normal, P + 'mb30')
        self.assertIsNone(self.level(doc, high))
        self.assertIsNone(self.level(doc, normal))
        # The value in force, published for the low guests only.
        self.assertEqual([10, 10, None, None],
                         [doc['instances'][u]['mb_limit']
                          for u in lows + [high, normal]])
        self.assertEqual({0: 10, 1: 10}, self.schemata(P + 'mb10')['MB'])
        domains = doc['host']['controller']['domains']
        self.assertEqual({'configured'},
                         {d['capacity_source'] for d in domains.values()})
        # Each low guest counts on every domain where it was active.
        self.assertGreaterEqual(sum(d['throttled']
                                    for d in domains.values()), 2)
        self.assertIn('-> 10%', self.logger.output)
        self.assertIn('saturated with 1 active high, every active low to '
                      'the floor', self.logger.output)

        # A restarted agent takes the levels back: its first ticks move
        # nothing out of the throttle group.
        self.agent = self.new_agent()
        self.agent.tick()
        for uuid in lows:
            self.assertPlaced(uuid, P + 'mb10')
        self.assertEqual({lows[0]: 10, lows[1]: 10},
                         dict(self.agent.protection.levels))

        # The protected guest goes away: released in steps, the capped one
        # up to its static 60%, the other back to the default group.
        self.destroy(high)
        self.agent.tick()
        seen = set()

        def released(doc):
            seen.update(self.level(doc, u) for u in lows)
            return all(self.level(doc, u) is None for u in lows)

        doc = self.until(released, 'release')
        # Released: the static cap, else the maximum, is in force.
        self.assertEqual([100, 60], [doc['instances'][u]['mb_limit']
                                     for u in lows])
        # In steps of 20 points, not at once.
        self.assertLessEqual({30, 50}, seen)
        self.agent.tick()
        self.assertPlaced(lows[0], None)
        self.assertPlaced(lows[1], P + 'mb60')
        self.assertPlaced(normal, P + 'mb30')
        self.assertNotIn(P + 'mb10', self.groups())

    def test_domains_sharing_a_node_are_one_pool(self):
        # What libvirtd would say of this machine under the emulator: the
        # emulated L3 domains' CPUs (as the profile assigns them) in the
        # machine's one NUMA node, whose memory they share.
        online, _n = emu_launcher.host_cpus()
        banks = profiles.get_profile(self.profile).assign_cpus(online)
        self.source.capabilities_xml = (
            "<capabilities><host><topology><cells num='1'><cell id='0'>"
            "<cpus num='%d'>%s</cpus></cell></cells></topology><cache>%s"
            "</cache></host></capabilities>" % (
                len(online), ''.join("<cpu id='%d'/>" % c for c in online),
                ''.join("<bank id='%d' level='3' type='both' size='1' "
                        "unit='MiB' cpus='%s'/>" % (
                            d, ','.join(str(c) for c in cpus))
                        for d, cpus in sorted(banks.items()))))
        self.agent = self.new_agent()
        high = self.boot_classed('high')
        low = self.boot_classed('low')
        self.agent.tick()
        doc = self.until(lambda d: self.level(d, low) == 10, 'floor')
        domains = doc['host']['controller']['domains']
        self.assertEqual({'0': sorted(banks)},
                         {k: v['members'] for k, v in domains.items()})
        self.assertEqual(1, domains['0']['throttled'])
        self.assertIsNone(self.level(doc, high))
        self.assertIn('pools: 0: domains 0,1', self.logger.output)


class TestLowWithoutMBA(ControllerCase):
    """A low guest on the reference host booted with ``rdt=!mba``.

    Nova places low instances on hosts without MBA (no high one can run
    there, so none needs them throttled): the agent monitors and
    publishes the class, and does nothing else.
    """

    profile = 'reference-no-mba'

    def test_class_published_nothing_done(self):
        low = self.boot_classed('low')
        normal = self.boot_classed('normal')
        self.agent.tick()
        self.assertPlaced(low, None)
        mark = self.mark()
        docs = [self.period() for _ in range(4)]
        self.agent.tick()
        doc = docs[-1]
        self.assertIs(False, doc['host']['mba'])
        inst = doc['instances'][low]
        self.assertEqual('low', inst['priority'])
        self.assertIsNone(inst.get('level'))
        self.assertIsNone(inst.get('mb_limit'))
        # Monitored, as every low instance where the host can.
        self.assertTrue(any(d['instances'][low].get('mbm_total_bps')
                            for d in docs[1:]), docs)
        self.assertEqual('normal', doc['instances'][normal]['priority'])
        # Converged: no throttle group, no write to resctrl after the
        # first tick, no warning at any tick.
        self.assertEqual([], self.mutations(mark))
        self.assertEqual([], [g for g in self.groups()
                              if g.startswith(P + 'mb')])
        self.assertPlaced(low, None)
        self.assertEqual([], [line for line in
                              self.logger.output.splitlines()
                              if line.startswith(('WARNING', 'ERROR'))])
        self.assertNotIn('Bandwidth controller', self.logger.output)

        from prometheus_client import exposition

        from rdt_virt.telemetry import prometheus
        text = exposition.generate_latest(prometheus.registry_for(
            lambda: doc)).decode()
        self.assertIn('class="low"', text)
        self.assertNotIn('rdt_virt_instance_controller_level{', text)
