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

"""The Ceilometer pollsters read the agent's state file."""

import json
import os
import time

import fixtures

from rdt_virt.agent import state
from tests import base

UUID1 = '11111111-1111-4111-8111-111111111111'
UUID2 = '22222222-2222-4222-8222-222222222222'


class Server(object):
    """Just enough of a Nova server for make_sample_from_instance."""

    def __init__(self, uuid):
        self.id = uuid
        self.name = 'vm-' + uuid[:4]
        self.flavor = {'name': 'm1.batch', 'vcpus': 2, 'ram': 512,
                       'disk': 1, 'ephemeral': 0}
        self.hostId = 'host'
        self.status = 'ACTIVE'
        self.image = None
        self.metadata = {}
        self.user_id = 'user'
        self.tenant_id = 'project'


def document(now):
    return {'time': now, 'interval': 10.0, 'host': {}, 'instances': {
        UUID1: {'name': 'instance-1', 'group': 'rdtvirt-mb10',
                'policy': {'mem_bw': 10}, 'mbm_total_bps': 1.5e8,
                'mbm_local_bps': 1.2e8, 'llc_occupancy_bytes': 4194304,
                'reason': None},
        UUID2: {'name': 'instance-2', 'group': None, 'policy': {},
                'mbm_total_bps': None, 'mbm_local_bps': None,
                'llc_occupancy_bytes': None, 'reason': 'rotated out'}}}


class TestPollsters(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            from rdt_virt.telemetry import pollsters
        except ImportError:
            self.skipTest('ceilometer is not installed')
        self.pollsters = pollsters
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'state.json')
        from ceilometer import service
        # Ceilometer's own configuration object, not rdt-virt's.
        self.conf = service.prepare_service([], [])

    def make(self, cls):
        pollster = cls(self.conf)
        self.conf.set_override('state_file', self.path, 'rdt')
        return pollster

    def samples(self, cls, resources=(UUID1, UUID2)):
        pollster = self.make(cls)
        return list(pollster.get_samples(None, {}, [Server(u) for u in
                                                    resources]))

    def test_meters(self):
        doc = document(time.time())
        # What the agent publishes for hw:mem_bw=15 in steps of 10.
        doc['instances'][UUID1]['policy'] = {'mem_bw': 20,
                                             'mem_bw_requested': 15}
        state.write(self.path, doc)
        p = self.pollsters
        for cls, name, unit, volume in (
                (p.MemoryBandwidthTotalPollster, 'memory.bandwidth.total',
                 'B/s', 1.5e8),
                (p.MemoryBandwidthLocalPollster, 'memory.bandwidth.local',
                 'B/s', 1.2e8),
                (p.CPUL3CachePollster, 'cpu_l3_cache', 'B', 4194304)):
            sample, = self.samples(cls)
            self.assertEqual((name, 'gauge', unit, volume, UUID1),
                             (sample.name, sample.type, sample.unit,
                              sample.volume, sample.resource_id))
            self.assertEqual('rdtvirt-mb10',
                             sample.resource_metadata['rdt_group'])
            self.assertEqual({'mem_bw': 20, 'mem_bw_requested': 15},
                             sample.resource_metadata['rdt_policy'])
            self.assertEqual('project', sample.project_id)

    def test_energy_meters(self):
        doc = document(time.time())
        doc['instances'][UUID1].update(power_watts=3.5, energy_joules=120.25,
                                       activity_fps=5.469)
        # A host without telemetry: no such fields, no samples.
        state.write(self.path, doc)
        p = self.pollsters
        for cls, name, kind, unit, volume in (
                (p.CPUCorePowerPollster, 'cpu.core.power', 'gauge', 'W',
                 3.5),
                (p.CPUCoreEnergyPollster, 'cpu.core.energy', 'cumulative',
                 'J', 120.25),
                (p.CPUCoreActivityPollster, 'cpu.core.activity', 'gauge',
                 'F/s', 5.469)):
            sample, = self.samples(cls)
            self.assertEqual((name, kind, unit, volume, UUID1),
                             (sample.name, sample.type, sample.unit,
                              sample.volume, sample.resource_id))

    def test_protection_class_and_level_in_metadata(self):
        doc = document(time.time())
        doc['instances'][UUID1].update(priority='low', level=30)
        doc['host']['controller'] = {'unit': 'percent', 'domains': {}}
        state.write(self.path, doc)
        sample, = self.samples(self.pollsters.MemoryBandwidthTotalPollster)
        meta = sample.resource_metadata
        self.assertEqual(('low', 30, 'percent'),
                         (meta['rdt_priority'], meta['rdt_level'],
                          meta['rdt_level_unit']))
        # An older agent's document: the default class, no level.
        state.write(self.path, document(time.time()))
        sample, = self.samples(self.pollsters.MemoryBandwidthTotalPollster)
        meta = sample.resource_metadata
        self.assertEqual(('normal', None, None),
                         (meta['rdt_priority'], meta['rdt_level'],
                          meta['rdt_level_unit']))

    def test_bandwidth_limit_of_low_instances_in_the_hosts_unit(self):
        cls = self.pollsters.MemoryBandwidthLimitPollster
        for unit, sample_unit, limit in (('percent', '%', 30),
                                         ('MBps', 'MB/s', 1200),
                                         ('amd', '1/8 GB/s', 16)):
            doc = document(time.time())
            # UUID1 is held; UUID2 is a normal instance: no limit.
            doc['instances'][UUID1].update(priority='low', level=limit,
                                           mb_limit=limit)
            doc['host']['controller'] = {'unit': unit, 'domains': {}}
            state.write(self.path, doc)
            sample, = self.samples(cls)
            self.assertEqual(('memory.bandwidth.limit', 'gauge', sample_unit,
                              limit, UUID1),
                             (sample.name, sample.type, sample.unit,
                              sample.volume, sample.resource_id))
        # Released: the static cap (or the maximum) in force, not nothing,
        # so that Gnocchi's history shows when the throttling ended.
        doc['instances'][UUID1].update(level=None, mb_limit=100)
        doc['host']['controller'] = {'unit': 'percent', 'domains': {}}
        state.write(self.path, doc)
        sample, = self.samples(cls)
        self.assertEqual((100, None), (sample.volume,
                                       sample.resource_metadata['rdt_level']))
        # An agent without the controller's part publishes no unit: no
        # number without its unit.
        del doc['host']['controller']
        state.write(self.path, doc)
        self.assertEqual([], self.samples(cls))

    def put(self, doc, text=None):
        with open(self.path, 'w') as f:
            f.write(json.dumps(dict(doc, version=1)) if text is None
                    else text)
        os.chmod(self.path, 0o644)

    def test_ceilometers_exporter_labels_the_project(self):
        # ceilometer-polling's Prometheus exporter turns each sample into
        # a series; its project label is the sample's project_id, the
        # server's tenant from Nova (the discovery), which Aetos filters
        # tenants' queries on as it does the agent's series.
        try:
            from ceilometer.polling import prom_exporter
        except ImportError:
            self.skipTest('this Ceilometer has no Prometheus exporter')
        from ceilometer.publisher import utils
        state.write(self.path, document(time.time()))
        p = self.pollsters
        for cls in (p.MemoryBandwidthTotalPollster,
                    p.MemoryBandwidthLocalPollster, p.CPUL3CachePollster):
            sample, = self.samples(cls)
            message = utils.meter_message_from_counter(sample, 'secret')
            found = prom_exporter._gen_labels(message)
            labels = dict(zip(found['keys'], found['values']))
            self.assertEqual((Server(UUID1).tenant_id, UUID1),
                             (labels['project'], labels['resource']),
                             sample.name)

    def test_hostile_values_skipped_others_published(self):
        doc = document(time.time())
        doc['instances'][UUID2] = 'not an object'
        bad = doc['instances'][UUID1] = dict(doc['instances'][UUID1])
        uuid3 = '33333333-3333-4333-8333-333333333333'
        doc['instances'][uuid3] = dict(bad, mbm_total_bps=2e8)
        bad.update(mbm_total_bps='1e12', policy=['x'], group={'a': 1})
        self.put(doc)
        samples = self.samples(self.pollsters.MemoryBandwidthTotalPollster,
                               (UUID1, UUID2, uuid3))
        self.assertEqual([(uuid3, 2e8)],
                         [(s.resource_id, s.volume) for s in samples])

    def test_truncated_or_hostile_document_yields_nothing(self):
        doc = document(time.time())
        text = json.dumps(dict(doc, version=1))
        cls = self.pollsters.MemoryBandwidthTotalPollster
        for bad in (text[:len(text) // 2], '{"version": 1, "time": NaN}',
                    json.dumps(dict(doc, version=1, interval='10')),
                    json.dumps(dict(doc, version=1, instances=[UUID1])),
                    json.dumps(dict(doc, version=1, time='now'))):
            self.put(doc, bad)
            self.assertEqual([], self.samples(cls), bad[:60])

    def test_default_discovery(self):
        pollster = self.make(self.pollsters.CPUL3CachePollster)
        self.assertEqual('local_instances', pollster.default_discovery)

    def test_no_state_file(self):
        self.assertEqual([], self.samples(
            self.pollsters.MemoryBandwidthTotalPollster))

    def test_stale_state_file_ignored(self):
        state.write(self.path, document(time.time() - 600))
        self.assertEqual([], self.samples(
            self.pollsters.MemoryBandwidthTotalPollster))

    def test_state_read_once_per_cycle(self):
        state.write(self.path, document(time.time()))
        pollster = self.make(self.pollsters.MemoryBandwidthTotalPollster)
        cache = {}
        list(pollster.get_samples(None, cache, [Server(UUID1)]))
        os.unlink(self.path)
        samples = list(pollster.get_samples(None, cache, [Server(UUID1)]))
        self.assertEqual(1, len(samples))
