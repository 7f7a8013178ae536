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

"""Scheduler and Placement records across an upgrade.

A scheduler one release newer than the compute hosts reads the stats an
older rdt-virt wrote (``tests/fixtures/upgrade``); one release older reads
a newer form, which it must read in part or refuse, never misread: a host
whose stat it refuses has no RDT, so RDT flavors are filtered away from it
(doc/source/admin/upgrade.rst).
"""

import glob
import json
import os

from nova.compute import provider_tree
from nova import exception
from nova.scheduler import weights as nova_weights

from nova_plugin.scheduler import filters
from nova_plugin.scheduler import weights
from nova_plugin.virt import driver
from nova_plugin.virt import placement as virt_placement
from rdt_virt.policy import hoststats
from rdt_virt.policy import placement
from tests import base
from tests.unit.nova_plugin import fakes
from tests.unit.nova_plugin import test_driver

UPGRADE = os.path.join(base.FIXTURES_DIR, 'upgrade')
MEM_BW = {'hw:mem_bw': '10'}


def load(name):
    with open(os.path.join(UPGRADE, name)) as f:
        return json.load(f)


def names(prefix):
    found = sorted(os.path.basename(p) for p in glob.glob(
        os.path.join(UPGRADE, prefix + '*.json')))
    assert found, 'no fixture %s*' % prefix
    return found


def doc_of(stats):
    return json.loads(stats[hoststats.KEY])


def with_doc(stats, **changes):
    """``stats`` with keys of its ``rdt_virt`` document changed."""
    doc = dict(doc_of(stats), **changes)
    return dict(stats, **{hoststats.KEY: json.dumps(doc)})


def hosts_of(*stats):
    return [fakes.host_state('host%d' % i, s) for i, s in enumerate(stats)]


class TestOlderComputeStats(base.TestCase):
    """Stats of the previous release, read by this scheduler."""

    def setUp(self):
        super().setUp()
        self.useFixture(fakes.SchedulerState())

    def test_every_released_form_reads_back_whole(self):
        for name in names('compute-stats-v1-'):
            stats = load(name)
            rdt = hoststats.decode(stats)
            self.assertIsNotNone(rdt, name)
            # Nothing the old writer said is lost or changed in reading.
            old = doc_of(stats)
            again = doc_of(hoststats.encode(rdt))
            self.assertEqual(old, {k: again.get(k) for k in old}, name)

    def test_filter_places_by_what_old_hosts_report(self):
        by_name = {n[len('compute-stats-v1-'):-5]: load(n)
                   for n in names('compute-stats-v1-')}
        hosts = {n: fakes.host_state(n, s) for n, s in by_name.items()}
        filt = filters.RDTFilter()
        cases = [
            (MEM_BW, {'reference', 'reference-shared', 'cdp'}),
            ({'hw:mem_bw_mbps': '1000'}, {'mba-mbps', 'amd'}),
            # libvirt makes no groups where MBA has no minimum (AMD).
            ({'hw:cache_l3': '2048'}, {'reference', 'reference-shared',
                                       'mba-mbps'}),
            ({'hw:cache_l3_code': '1024', 'hw:cache_l3_data': '1024'},
             {'cdp'}),
            ({'hw:rdt_priority': 'high'}, set(by_name) - {'none'}),
            ({}, set(by_name)),
        ]
        for specs, expected in cases:
            passed = filt.filter_all(list(hosts.values()),
                                     fakes.request_spec(specs))
            self.assertEqual(expected, {h.host for h in passed}, specs)

    def test_weigher_reads_old_headroom_and_bandwidth(self):
        ref = load('compute-stats-v1-reference.json')
        # The same host, busier and with less headroom.
        busy = with_doc(ref, mbw=doc_of(ref)['mbw'] * 4, free_closids=1)
        hosts = [fakes.host_state('busy', busy),
                 fakes.host_state('ref', ref)]
        weighed = nova_weights.HostWeightHandler().get_weighed_objects(
            [weights.RDTWeigher()], hosts, fakes.request_spec(MEM_BW))
        self.assertEqual(['ref', 'busy'], [w.obj.host for w in weighed])
        self.assertGreater(weighed[0].weight, weighed[1].weight)

    def test_forms_older_than_the_fixtures_read_too(self):
        # Keys added to version 1 over time: a writer before them omits
        # them, and the reader takes their defaults.
        stats = load('compute-stats-v1-reference.json')
        doc = doc_of(stats)
        for key in ('claimed', 'classes', 'pkg', 'arch', 'closid_limit',
                    'io_alloc', 'mbw'):
            del doc[key]
        doc['membw'] = [row[:6] for row in doc['membw']]
        rdt = hoststats.decode({hoststats.KEY: json.dumps(doc)})
        self.assertIsNone(rdt.claimed)
        self.assertEqual({}, dict(rdt.classes))
        self.assertEqual(doc['free_closids'], rdt.capacity.free_closids)
        self.assertTrue(filters.RDTFilter().host_passes(
            fakes.host_state('old', {hoststats.KEY: json.dumps(doc)}),
            fakes.request_spec(MEM_BW)))


class TestNewerComputeStats(base.TestCase):
    """Stats of a newer release, read by this (older) scheduler.

    upgrade.rst has the schedulers upgraded first; in the other order, a
    newer compute host must never get an RDT flavor placed blindly.
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fakes.SchedulerState())
        self.ref = load('compute-stats-v1-reference.json')
        self.filt = filters.RDTFilter()

    def passes(self, stats, specs=MEM_BW):
        self.useFixture(fakes.SchedulerState())
        return self.filt.host_passes(fakes.host_state('h', stats),
                                     fakes.request_spec(specs))

    def test_a_higher_version_is_a_host_without_rdt(self):
        newer = with_doc(self.ref, v=hoststats.VERSION + 1)
        self.assertIsNone(hoststats.decode(newer))
        self.assertTrue(self.passes(self.ref))
        self.assertFalse(self.passes(newer))
        # Only RDT flavors lose the host: plain ones still go there.
        self.assertTrue(self.passes(newer, {}))
        self.assertTrue(self.passes(newer, {'hw:rdt_monitor': 'false'}))

    def test_only_newer_hosts_left_fails_saying_why(self):
        newer = with_doc(self.ref, v=hoststats.VERSION + 1)
        e = self.assertRaises(
            exception.NoValidHost, self.filt.filter_all,
            hosts_of(newer, newer), fakes.request_spec(MEM_BW))
        self.assertIn('2 hosts: the host reports no RDT', str(e))

    def test_mixed_hosts_the_weigher_sees_only_what_it_reads(self):
        newer = with_doc(self.ref, v=hoststats.VERSION + 1)
        hosts = [fakes.host_state('newer', newer),
                 fakes.host_state('older', self.ref)]
        passed = self.filt.filter_all(hosts, fakes.request_spec(MEM_BW))
        self.assertEqual(['older'], [h.host for h in passed])
        raw = weights.RDTWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            fakes.request_spec(MEM_BW))
        # No headroom is read on the newer host: it never weighs better.
        self.assertGreater(raw[1], raw[0])

    def test_added_keys_and_row_values_are_ignored(self):
        doc = doc_of(self.ref)
        newer = with_doc(
            self.ref, future={'a': 1},
            caches=[row + [7] for row in doc['caches']],
            membw=[row + ['x'] for row in doc['membw']],
            monitor=doc['monitor'] + [[0]])
        rdt = hoststats.decode(newer)
        self.assertIsNotNone(rdt)
        self.assertEqual(hoststats.decode(self.ref), rdt)
        self.assertTrue(self.passes(newer))
        self.assertTrue(self.passes(newer, {'hw:cache_l3': '2048'}))

    def test_values_that_change_what_fits_are_refused(self):
        cases = [
            # A strategy this scheduler would take for "shared".
            {'strategy': 'pooled'},
            # An architecture whose RMIDs it would count as x86's.
            {'arch': 'riscv'},
            # A cache resource it does not know.
            {'caches': doc_of(self.ref)['caches'] + [
                ['L4', 255, 1, 16, 0, [[0, 1048576]], [0]]]},
            # A row it cannot read.
            {'monitor': [192]},
            # Known keys in another shape.
            {'free_masks': [1, 2]},
            {'classes': {'0': [1]}},
        ]
        for changes in cases:
            newer = with_doc(self.ref, **changes)
            self.assertIsNone(hoststats.decode(newer), changes)
            self.assertFalse(self.passes(newer), changes)


class TestPlacementRecords(base.TestCase):
    """Traits, the CLOSID inventory and flavors' Placement keys.

    A flavor set up for the previous release must land on the hosts of
    this one: no trait it requires may be renamed, and the compute host
    must not refuse its keys.
    """

    def test_old_traits_are_still_reported(self):
        for name in names('placement-v1-'):
            variant = name[len('placement-v1-'):-5]
            stats = load('compute-stats-v1-%s.json' % variant)
            caps = hoststats.decode(stats).caps
            self.assertLessEqual(set(load(name)['traits']),
                                 driver.traits_for(caps), name)

    def test_old_inventory_form(self):
        for name in names('placement-v1-'):
            old = load(name)
            self.assertEqual(placement.RESOURCE_CLASS, old['resource_class'])
            record = old['inventory']
            if record is None:
                self.assertIsNone(placement.inventory(0, 0, 0))
                continue
            self.assertEqual(record, placement.inventory(
                record['total'], record['reserved'], 0), name)

    def test_old_inventory_kept_when_a_host_reports_none(self):
        old = load('placement-v1-reference.json')['inventory']
        tree = provider_tree.ProviderTree()
        tree.new_root('n', '00000000-0000-4000-8000-0000000000aa')
        capacity = fakes.fresh_capacity(fakes.NONE, closids=0)
        virt_placement.update_inventory(
            tree, 'n', fakes.NONE, capacity, [],
            {placement.RESOURCE_CLASS: dict(old, future_field=1)})
        kept = tree.data('n').inventory[placement.RESOURCE_CLASS]
        self.assertEqual(old['total'], kept['reserved'])

    def test_old_flavors_are_not_refused(self):
        flavors = load('placement-v1-reference.json')['flavors']
        for name, specs in sorted(flavors.items()):
            self.assertEqual((), placement.conflicts(specs), name)
            self.assertTrue(placement.audit(specs).ok, name)

    def test_old_flavors_find_their_traits(self):
        flavors = load('placement-v1-reference.json')['flavors']
        reported = {}
        for name in names('placement-v1-'):
            caps = hoststats.decode(load('compute-stats-v1-%s.json' % (
                name[len('placement-v1-'):-5]))).caps
            reported[name] = driver.traits_for(caps)
        for flavor, specs in flavors.items():
            required = {k.split(':', 1)[1] for k, v in specs.items()
                        if k.startswith('trait:') and v == 'required'}
            self.assertTrue(any(required <= traits
                                for traits in reported.values()), flavor)

    def test_unknown_rdt_trait_of_a_newer_flavor_is_left_alone(self):
        specs = {'hw:mem_bw': '10', 'resources:CUSTOM_RDT_CLOSID': '1',
                 'trait:CUSTOM_RDT_MBA': 'required',
                 'trait:CUSTOM_RDT_L3_IO_ALLOC': 'required'}
        result = placement.audit(specs)
        self.assertEqual((), result.conflicts)
        self.assertTrue(result.ok)
        self.assertEqual({}, dict(result.unneeded))


class TestProviderTraits(test_driver.DriverTestCase):

    def test_traits_of_a_newer_compute_are_taken_back(self):
        # Left by a newer rdt-virt before the host went back to this one:
        # this host does not say it has the feature, so it must not keep
        # the trait; an operator's own traits stay.
        tree = provider_tree.ProviderTree()
        tree.new_root('node', '00000000-0000-4000-8000-0000000000aa')
        tree.add_traits('node', 'CUSTOM_RDT_L3_IO_ALLOC', 'CUSTOM_RACK_A')
        self.drv.update_provider_tree(tree, 'node')
        traits = set(tree.data('node').traits)
        self.assertNotIn('CUSTOM_RDT_L3_IO_ALLOC', traits)
        self.assertIn('CUSTOM_RACK_A', traits)
        self.assertIn('CUSTOM_RDT_MBA', traits)
