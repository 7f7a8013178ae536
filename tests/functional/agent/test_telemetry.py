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

"""Rates against the emulator's ground truth, and what reads them.

Constant rates are injected through the emulator's control socket into the
counters of the group that counts each instance; the agent's rates must
match them within 1%, also across a counter reset, a re-created group and
a sentinel. Ceilometer's own polling manager then turns the published
state into samples.
"""

import io
import os
import time
from unittest import mock

import fixtures

from rdt_virt.agent import carry
from rdt_virt.cmd import cli
from tests.functional.agent import base

P = base.PREFIX
TOTAL = 'mbm_total_bytes'
LOCAL = 'mbm_local_bytes'
# Per instance: (domain 0 rate, domain 1 rate), bytes per second.
RATES = ((3.0e8, 1.0e8), (5.0e7, 2.5e7), (1.2e9, 0.0))
# Cache occupancy per domain: idle fake threads never give it a value.
OCCUPANCY = 4 * 65536


def counter_path(counters):
    group, mon = counters
    parts = [group] if group else []
    if mon:
        parts += ['mon_groups', mon]
    return '/'.join(parts) or '/'


class RatesTestCase(base.AgentTestCase):

    def setUp(self):
        super().setUp()
        self.uuids = [self.boot(base.shared(10)),
                      self.boot(base.own(30, 'percent')),
                      self.boot()]
        self.agent.tick()
        self.inject()

    def inject(self, only=None):
        for uuid, (r0, r1) in zip(self.uuids, RATES):
            if only and uuid != only:
                continue
            path = counter_path(self.agent.placements[uuid].counters)
            for dom, rate in ((0, r0), (1, r1)):
                self.client.set_rate(path, rate, domain=dom, event=TOTAL)
                self.client.set_rate(path, rate / 2, domain=dom,
                                     event=LOCAL)
                self.client.set_counter(path, OCCUPANCY, domain=dom,
                                        event='llc_occupancy')

    def sample_after(self, seconds=2.0):
        time.sleep(seconds)
        return self.agent.sample()

    def assertRates(self, doc, skip=()):
        for uuid, (r0, r1) in zip(self.uuids, RATES):
            if uuid in skip:
                continue
            inst = doc['instances'][uuid]
            truth = r0 + r1
            for field, want in (('mbm_total_bps', truth),
                                ('mbm_local_bps', truth / 2)):
                got = inst[field]
                self.assertIsNotNone(got, (uuid, inst))
                self.assertLess(abs(got - want), max(0.01 * want, 1e5),
                                (field, got, want))
        host = doc['host']
        want = sum(r0 + r1 for (r0, r1), u in zip(RATES, self.uuids)
                   if u not in skip)
        self.assertLess(abs(host['mbm_total_bps'] - want), 0.01 * want)


class TestRates(RatesTestCase):

    def test_rates_within_one_percent(self):
        first = self.agent.sample()
        for uuid in self.uuids:
            self.assertIsNone(first['instances'][uuid]['mbm_total_bps'])
            self.assertEqual('first sample',
                             first['instances'][uuid]['reason'])
        for _ in range(3):
            self.assertRates(self.sample_after())
        doc = self.state()
        self.assertEqual(1.0, doc['host']['coverage'])
        self.assertEqual(3, doc['host']['monitored'])

    def test_across_a_counter_reset(self):
        self.agent.sample()
        self.assertRates(self.sample_after())
        self.assertRates(self.sample_after())
        a = self.uuids[0]
        self.client.reset(counter_path(self.agent.placements[a].counters))
        # Read before the counter regrows past its last reading: a reset
        # is only visible as a decrease (re-created groups are known by
        # their new generation instead).
        doc = self.sample_after(1.0)
        # No value rather than a negative or absurd one...
        self.assertIsNone(doc['instances'][a]['mbm_total_bps'])
        self.assertEqual('counter reset', doc['instances'][a]['reason'])
        self.assertRates(doc, skip=(a,))
        # ... and exact again from the next reading.
        self.assertRates(self.sample_after())

    def test_across_group_recreation(self):
        self.agent.sample()
        a = self.uuids[0]
        os.rmdir(self.path(P + 'mb10', 'mon_groups', P + 'm-' + a))
        self.agent.tick()
        self.inject(only=a)
        doc = self.sample_after()
        self.assertEqual('first sample', doc['instances'][a]['reason'])
        self.assertRates(self.sample_after())

    def test_rates_go_on_across_a_restart(self):
        self.agent.sample()
        self.assertRates(self.sample_after())
        # A graceful stop (the end of Agent.run) leaves the baselines...
        self.agent._save_baselines()
        carried = carry.path_for(self.state_file)
        self.assertTrue(os.path.exists(carried))
        time.sleep(2.0)
        # ... and the next agent's first sample has rates: the mean over
        # the time no agent ran.
        self.agent = self.new_agent()
        self.assertTrue(self.agent._take_baselines())
        self.assertFalse(os.path.exists(carried))
        self.agent.tick()
        self.assertRates(self.agent.sample())
        self.assertRates(self.sample_after())

    def test_a_group_made_again_while_no_agent_ran(self):
        self.agent.sample()
        self.agent._save_baselines()
        a = self.uuids[0]
        os.rmdir(self.path(P + 'mb10', 'mon_groups', P + 'm-' + a))
        self.agent = self.new_agent()
        self.assertTrue(self.agent._take_baselines())
        # The new agent makes the group again: its counters start from
        # zero, and the old baselines are not taken for them.
        self.agent.tick()
        self.inject(only=a)
        doc = self.sample_after()
        self.assertEqual('first sample', doc['instances'][a]['reason'])
        self.assertRates(doc, skip=(a,))
        self.assertRates(self.sample_after())

    def test_sentinel(self):
        self.agent.sample()
        b = self.uuids[1]
        path = counter_path(self.agent.placements[b].counters)
        self.client.set_sentinel(path, 'Unavailable', domain=1, event=TOTAL)
        doc = self.sample_after()
        self.assertIsNone(doc['instances'][b]['mbm_total_bps'])
        self.assertEqual('Unavailable', doc['instances'][b]['reason'])
        self.assertRates(doc, skip=(b,))
        self.client.set_sentinel(path, None, domain=1, event=TOTAL)
        self.assertRates(self.sample_after())

    def test_idle_instance_has_no_traffic_yet(self):
        # Its group's threads have not run: every file reads Unavailable,
        # as on real kernels. No rate, no error, and the rest unharmed.
        idle = self.boot(base.shared(10))
        self.agent.tick()
        self.agent.sample()
        doc = self.sample_after()
        inst = doc['instances'][idle]
        self.assertEqual('no traffic yet', inst['reason'])
        self.assertEqual((None, None, None), (
            inst['mbm_total_bps'], inst['mbm_local_bps'],
            inst['llc_occupancy_bytes']))
        self.assertRates(doc)
        out = io.StringIO()
        self.assertEqual(0, cli.main(['--state-file', self.state_file,
                                      'top', '--once'], out=out))
        row = [line for line in out.getvalue().splitlines()
               if idle[:8] in line][0]
        self.assertIn('no traffic yet', row)

    def test_cli_table_from_the_agent(self):
        self.agent.sample()
        self.sample_after()
        out = io.StringIO()
        self.assertEqual(0, cli.main(['--state-file', self.state_file,
                                      'top', '--once'], out=out))
        row = [line.split() for line in out.getvalue().splitlines()
               if P + 'mb10' in line][0]
        # MBT[MB/s] of the first instance: 4e8 B/s.
        self.assertLess(abs(float(row[-1]) - 400.0), 4.0)


class CeilometerTestCase(RatesTestCase):
    """Ceilometer's configuration and libvirt domains for the instances."""

    FLAVOR = ('<nova:flavor name="m1.batch" id="42"><nova:memory>512'
              '</nova:memory><nova:disk>1</nova:disk><nova:swap>0</nova:swap>'
              '<nova:ephemeral>0</nova:ephemeral><nova:vcpus>2</nova:vcpus>'
              '</nova:flavor>')

    def setUp(self):
        super().setUp()
        try:
            from ceilometer.polling import manager
            from ceilometer import service
            import libvirt
        except ImportError as e:
            self.skipTest('ceilometer or libvirt-python missing: %s' % e)
        self.manager = manager
        # libvirt's in-process test driver plays the hypervisor for
        # Ceilometer's libvirt_metadata discovery: same uuids as the
        # agent's instances, with Nova's metadata.
        self.conn = libvirt.open('test:///default')
        self.addCleanup(self.conn.close)
        for i, uuid in enumerate(self.uuids):
            dom = self.conn.createXML(self.domain_xml(i, uuid))
            self.addCleanup(dom.destroy)
        tmp = self.useFixture(fixtures.TempDir()).path
        polling = os.path.join(tmp, 'polling.yaml')
        with open(os.path.join(os.path.dirname(__file__), '..', '..', '..',
                               'etc', 'ceilometer', 'polling.yaml')) as f:
            text = f.read()
        with open(polling, 'w') as f:
            f.write(text)
        conf = service.prepare_service([], [])
        conf.set_override('cfg_file', polling, 'polling')
        conf.set_override('instance_discovery_method', 'libvirt_metadata',
                          'compute')
        # Ceilometer 25 (2025.2) and later ask Nova's API for each server
        # unless told not to; Ceilometer 24 always asks (for the flavor
        # id). No Nova runs here: it answers as Nova does for a server it
        # does not know, and Ceilometer then names the flavor by its name.
        if 'fetch_extra_metadata' in conf.compute:
            conf.set_override('fetch_extra_metadata', False, 'compute')
        else:
            from ceilometer.compute import discovery
            self.useFixture(fixtures.MockPatchObject(
                discovery.InstanceDiscovery, 'get_server',
                lambda discovery, uuid: None))
        conf.set_override('libvirt_uri', 'test:///default')
        conf.set_override('enable_notifications', False, 'polling')
        from rdt_virt.conf import rdt as rdt_conf
        rdt_conf.register_opts(conf)
        conf.set_override('state_file', self.state_file, 'rdt')
        self.conf = conf

    def domain_xml(self, i, uuid):
        return ('''<domain type='test'><name>instance-t%d</name>
<uuid>%s</uuid><memory>1024</memory><vcpu>2</vcpu><metadata>
<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
<nova:name>vm-%d</nova:name>%s<nova:owner><nova:user uuid="u1">u</nova:user>
<nova:project uuid="p1">p</nova:project></nova:owner></nova:instance>
</metadata><os><type arch='x86_64'>hvm</type></os></domain>''' % (
            i, uuid, i, self.FLAVOR))


class TestCeilometer(CeilometerTestCase):
    """Ceilometer's AgentManager polls the pollsters end to end."""

    def test_agent_manager_emits_samples_with_instance_ids(self):
        self.agent.sample()
        doc = self.sample_after()
        sent = []
        mgr = self.manager.AgentManager(0, self.conf, namespaces=['compute'])
        names = {e.name for e in mgr.extensions}
        self.assertTrue({'memory.bandwidth.total', 'memory.bandwidth.local',
                         'cpu_l3_cache'} <= names, names)
        mgr.polling_manager = self.manager.PollingManager(self.conf)
        tasks = mgr.setup_polling_tasks()
        with mock.patch.object(self.manager.PollingTask,
                               '_send_notification',
                               lambda task, samples: sent.extend(samples)):
            for task in tasks.values():
                mgr.interval_task(task)
        by_meter = {}
        for s in sent:
            by_meter.setdefault(s['counter_name'], {})[s['resource_id']] = s
        self.assertEqual({'memory.bandwidth.total', 'memory.bandwidth.local',
                          'cpu_l3_cache'}, set(by_meter))
        for uuid, (r0, r1) in zip(self.uuids, RATES):
            total = by_meter['memory.bandwidth.total'][uuid]
            self.assertEqual('B/s', total['counter_unit'])
            self.assertEqual('gauge', total['counter_type'])
            # What the agent measured, unchanged (how close that is to the
            # truth is the rates tests' subject, on an idle machine).
            measured = doc['instances'][uuid]['mbm_total_bps']
            self.assertAlmostEqual(measured, total['counter_volume'],
                                   delta=1e-6 * measured)
            self.assertLess(abs(total['counter_volume'] - (r0 + r1)),
                            0.1 * (r0 + r1))
            self.assertEqual('p1', total['project_id'])
            self.assertEqual('B',
                             by_meter['cpu_l3_cache'][uuid]['counter_unit'])
