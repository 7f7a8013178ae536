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
import shutil
import threading
import time
from unittest import mock

import fixtures
from nova.compute import provider_tree
from nova import exception as nova_exception
from nova import objects
from nova.virt.libvirt import driver as libvirt_driver

from nova_plugin.virt import driver
from rdt_virt.policy import hoststats
from tests import base

TREES = os.path.join(base.FIXTURES_DIR, 'resctrl')

CAPS_XML = '''<capabilities><host><cache>
<bank id='0' level='3' type='both' size='36608' unit='KiB' cpus='0-3'>
<control granularity='3328' unit='KiB' type='both' maxAllocs='16'/></bank>
<bank id='1' level='3' type='both' size='36608' unit='KiB' cpus='4-7'>
<control granularity='3328' unit='KiB' type='both' maxAllocs='16'/></bank>
<monitor level='3' maxMonitors='192'><feature name='llc_occupancy'/>
</monitor></cache>
<memory_bandwidth><node id='0' cpus='0-3'><control granularity='10' min='10'
maxAllocs='8'/></node><node id='1' cpus='4-7'><control granularity='10'
min='10' maxAllocs='8'/></node></memory_bandwidth></host></capabilities>'''

DOMAIN_XML = '''<domain type='kvm'><name>%(name)s</name><uuid>%(uuid)s</uuid>
<vcpu>2</vcpu><metadata>
<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
<nova:flavor name="f"><nova:extraSpecs>%(specs)s</nova:extraSpecs>
</nova:flavor></nova:instance></metadata></domain>'''

UUIDS = ['%d%d%d%d%d%d%d%d-0000-4000-8000-000000000000' % ((i,) * 8)
         for i in range(1, 9)]


def instance(n=0, specs=None, vcpus=2):
    flavor = objects.Flavor(name='f', vcpus=vcpus, memory_mb=512, root_gb=1,
                            ephemeral_gb=0, swap=0, extra_specs=specs or {})
    inst = mock.Mock(uuid=UUIDS[n], flavor=flavor)
    inst.name = 'instance-%08x' % (n + 1)
    return inst


def migration(source, dest):
    return mock.Mock(source_compute=source, dest_compute=dest)


class FakeDomain(object):

    def __init__(self, inst, specs):
        self.inst = inst
        self.specs = specs

    def UUIDString(self):
        return self.inst.uuid

    def ID(self):
        return 1

    def isActive(self):
        return 1

    def name(self):
        return self.inst.name

    def XMLDesc(self, flags):
        return DOMAIN_XML % {
            'name': self.inst.name, 'uuid': self.inst.uuid,
            'specs': ''.join('<nova:extraSpec name="%s">%s</nova:extraSpec>'
                             % item for item in self.specs.items())}


class DriverTestCase(base.TestCase):
    """RDTLibvirtDriver's own code, with LibvirtDriver's mocked away."""

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(level=20))
        tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(tmp, 'resctrl')
        shutil.copytree(os.path.join(TREES, 'reference'), self.root)
        # The tree's libvirt group would be instance-00000001's.
        os.rename(os.path.join(self.root,
                               'qemu-1-instance-00000001-vcpus_0-1'),
                  os.path.join(self.root, 'qemu-1-fixture-vcpus_0-1'))
        self.state_file = os.path.join(tmp, 'state.json')
        self.flags(resctrl_root=self.root, state_file=self.state_file,
                   group='rdt')
        self.domains = []
        self.drv = driver.RDTLibvirtDriver.__new__(driver.RDTLibvirtDriver)
        self.drv._rdt_setup(driver.CONF)
        self.drv._host = mock.Mock()
        self.drv._host.get_connection.return_value.getCapabilities.\
            return_value = CAPS_XML
        self.drv._host.list_instance_domains.side_effect = (
            lambda only_running=True: list(self.domains))
        for name in ('spawn', 'cleanup', 'finish_migration',
                     'confirm_migration', 'finish_revert_migration',
                     '_hard_reboot', 'pre_live_migration',
                     'post_live_migration_at_destination',
                     'rollback_live_migration_at_destination',
                     'get_available_resource', 'update_provider_tree',
                     'rescue', 'unrescue',
                     '_get_guest_config', 'init_host'):
            setattr(self, 'super_' + name.strip('_'), self.useFixture(
                fixtures.MockPatchObject(libvirt_driver.LibvirtDriver,
                                         name)).mock)
        self.super_get_available_resource.return_value = {
            'stats': {'uptime': '1'}}

    def claimed(self):
        return sorted(c.uuid for c in self.drv._rdt_claims.all())

    def free_closids(self):
        return self.drv.rdt_host().capacity.free_closids

    def add_groups(self, count):
        for i in range(count):
            os.mkdir(os.path.join(self.root, 'other-%d' % i))
            shutil.copy(os.path.join(self.root, 'schemata'),
                        os.path.join(self.root, 'other-%d' % i))
            os.mkdir(os.path.join(self.root, 'other-%d' % i, 'mon_groups'))


class TestSpawn(DriverTestCase):

    def test_claims_and_reports(self):
        self.assertEqual(4, self.free_closids())
        inst = instance(0, {'hw:mem_bw': '10'})
        self.domains.append(FakeDomain(inst, {}))
        self.drv.spawn(None, inst, 'image')
        self.super_spawn.assert_called_once_with(None, inst, 'image')
        self.assertEqual([inst.uuid], self.claimed())
        self.assertEqual(3, self.free_closids())
        self.assertIn('Claimed RDT resources: memory bandwidth 10 percent '
                      '(libvirt), monitoring', self.logger.output)

    def test_plain_flavor_claims_nothing(self):
        self.drv.spawn(None, instance(0), 'image')
        self.assertEqual([], self.claimed())

    def test_exhausted(self):
        self.add_groups(4)
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(0, {'hw:mem_bw': '10'}))
        self.assertEqual(
            'Insufficient compute resources: RDT capacity exhausted on this '
            'host: no free CLOSID for a new resctrl control group.',
            e.format_message())
        self.super_spawn.assert_not_called()
        self.assertEqual([], self.claimed())

    def test_cannot_serve(self):
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(0, {'hw:mem_bw_mbps': '10'}))
        self.assertIn('needs resctrl mounted with mba_MBps',
                      e.format_message())

    def test_priority_class_needs_mbm(self):
        with open(os.path.join(self.root, 'info', 'L3_MON', 'mon_features'),
                  'w') as f:
            f.write('llc_occupancy\n')
        self.drv._rdt_state(refresh=True)
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(0, {'hw:rdt_priority': 'high'}))
        self.assertIn('hw:rdt_priority=high needs memory bandwidth '
                      'monitoring (MBM)', e.format_message())
        self.super_spawn.assert_not_called()
        self.assertEqual([], self.claimed())
        # A low instance needs no MBM: no high one can run here.
        inst = instance(1, {'hw:rdt_priority': 'low'})
        self.drv.spawn(None, inst, 'image')
        self.super_spawn.assert_called_once_with(None, inst, 'image')
        self.assertEqual([inst.uuid], self.claimed())

    def test_priority_high_needs_mba_low_does_not(self):
        shutil.rmtree(self.root)
        shutil.copytree(os.path.join(TREES, 'monitoring'), self.root)
        self.drv._rdt_state(refresh=True)
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(0, {'hw:rdt_priority': 'high'}))
        self.assertIn('hw:rdt_priority=high needs memory bandwidth '
                      'allocation (MBA)', e.format_message())
        self.super_spawn.assert_not_called()
        inst = instance(1, {'hw:rdt_priority': 'low'})
        self.drv.spawn(None, inst, 'image')
        self.super_spawn.assert_called_once_with(None, inst, 'image')
        claim = self.drv._rdt_claims.get(inst.uuid)
        self.assertEqual('low', claim.plan.priority)
        self.assertIsNone(claim.plan.mem_bw)
        self.assertTrue(claim.plan.monitor)
        # Its cap would still need MBA.
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(2, {'hw:rdt_priority': 'low',
                                           'hw:mem_bw': '30'}))
        self.assertIn('no memory bandwidth allocation (MBA)',
                      e.format_message())

    def test_invalid_extra_specs(self):
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv.spawn, None,
                              instance(0, {'hw:mem_bw': '10',
                                           'hw:mem_bw_mbps': '10'}))
        self.assertIn('cannot be combined', e.format_message())

    def test_failed_spawn_releases(self):
        self.super_spawn.side_effect = ValueError('boom')
        self.assertRaises(ValueError, self.drv.spawn, None,
                          instance(0, {'hw:mem_bw': '10'}))
        self.assertEqual([], self.claimed())
        self.assertEqual(4, self.free_closids())

    def test_two_spawns_race_for_the_last_closid(self):
        self.add_groups(3)
        started = threading.Barrier(2)
        real_read = self.drv._rdt_state

        def slow_read(*args, **kwargs):
            state = real_read(*args, **kwargs)
            time.sleep(0.05)
            return state

        self.drv._rdt_state = slow_read
        results = []

        def boot(n):
            started.wait()
            try:
                self.drv.spawn(None, instance(n, {'hw:mem_bw': '10'}))
                results.append('ok')
            except nova_exception.ComputeResourcesUnavailable:
                results.append('refused')

        threads = [threading.Thread(target=boot, args=(n,)) for n in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(['ok', 'refused'], sorted(results))
        self.assertEqual(1, len(self.claimed()))


class TestLifecycle(DriverTestCase):

    def spawn(self, n=0, specs=None):
        inst = instance(n, specs or {'hw:mem_bw': '10'})
        self.drv.spawn(None, inst)
        self.domains.append(FakeDomain(inst, inst.flavor.extra_specs))
        return inst

    def test_delete_releases(self):
        inst = self.spawn()
        self.drv.cleanup(None, inst, None)
        self.assertEqual([], self.claimed())

    def test_hard_reboot_keeps_the_claim(self):
        inst = self.spawn()

        def reboot(context, instance, *args, **kwargs):
            # LibvirtDriver._hard_reboot destroys (and so cleans up) first.
            self.drv.cleanup(context, instance, None, destroy_disks=False)
            self.domains.clear()
            self.drv.rdt_host()   # a resource report right then
            self.domains.append(FakeDomain(inst, {}))

        self.super_hard_reboot.side_effect = reboot
        self.drv._hard_reboot(None, inst)
        self.assertEqual([inst.uuid], self.claimed())
        self.assertEqual(set(), self.drv._rdt_recreating)
        self.assertEqual(set(), self.drv._rdt_busy)

    def test_rescue_keeps_the_claim(self):
        inst = self.spawn()

        def redefine(context, instance, *args, **kwargs):
            self.domains.clear()
            self.drv.rdt_host()
            self.domains.append(FakeDomain(inst, {}))

        for name in ('rescue', 'unrescue'):
            getattr(self, 'super_' + name).side_effect = redefine
            getattr(self.drv, name)(None, inst)
            self.assertEqual([inst.uuid], self.claimed())

    def test_resize_to_another_host(self):
        source = self.spawn()
        dest = driver.RDTLibvirtDriver.__new__(driver.RDTLibvirtDriver)
        dest._rdt_setup(driver.CONF)
        dest._host = self.drv._host
        new = instance(0, {'hw:mem_bw': '20'})
        dest.finish_migration(None, migration('a', 'b'), new, 'disk')
        self.assertEqual(20, dest._rdt_claims.get(new.uuid).plan.mem_bw.value)
        self.drv.confirm_migration(None, migration('a', 'b'), source, None)
        self.assertEqual([], self.claimed())

    def test_same_host_resize_confirm(self):
        inst = self.spawn()
        new = instance(0, {'hw:mem_bw': '20'})
        self.drv.finish_migration(None, migration('a', 'a'), new, 'disk')
        # Both flavors are held until the resize is confirmed.
        self.assertEqual(2, self.free_closids())
        self.drv.confirm_migration(None, migration('a', 'a'), inst, None)
        self.assertEqual(20, self.drv._rdt_claims.get(
            inst.uuid).plan.mem_bw.value)
        self.assertEqual(3, self.free_closids())

    def test_same_host_resize_revert(self):
        inst = self.spawn()
        new = instance(0, {'hw:mem_bw': '20'})
        self.drv.finish_migration(None, migration('a', 'a'), new, 'disk')
        # Revert: destroy on the "destination", then finish on the source.
        self.drv.cleanup(None, new, None, destroy_disks=False)
        self.drv.finish_revert_migration(None, inst, None, None)
        self.assertEqual(10, self.drv._rdt_claims.get(
            inst.uuid).plan.mem_bw.value)
        self.assertEqual(1, len(self.drv._rdt_claims))

    def test_same_host_resize_to_a_plain_flavor(self):
        inst = self.spawn()
        plain = instance(0, {})
        self.drv.finish_migration(None, migration('a', 'a'), plain, 'disk')
        self.assertIsNone(self.drv._rdt_claims.get(inst.uuid))
        self.assertEqual(3, self.free_closids())
        self.drv.confirm_migration(None, migration('a', 'a'), plain, None)
        self.assertEqual([], self.claimed())
        self.assertEqual(4, self.free_closids())
        # And reverted: the old claim is back.
        inst = self.spawn(1)
        self.drv.finish_migration(None, migration('a', 'a'),
                                  instance(1, {}), 'disk')
        self.drv.cleanup(None, instance(1, {}), None, destroy_disks=False)
        self.drv.finish_revert_migration(None, inst, None, None)
        self.assertEqual([inst.uuid], self.claimed())

    def test_failed_finish_migration_restores(self):
        inst = self.spawn()
        self.super_finish_migration.side_effect = ValueError('boom')
        self.assertRaises(ValueError, self.drv.finish_migration, None,
                          migration('a', 'a'),
                          instance(0, {'hw:mem_bw': '20'}), 'disk')
        self.assertEqual(10, self.drv._rdt_claims.get(
            inst.uuid).plan.mem_bw.value)
        self.assertEqual(1, len(self.drv._rdt_claims))

    def test_exhausted_destination(self):
        self.add_groups(4)
        self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                          self.drv.finish_migration, None,
                          migration('a', 'b'),
                          instance(0, {'hw:mem_bw': '20'}), 'disk')
        self.super_finish_migration.assert_not_called()

    def test_live_migration_destination(self):
        inst = instance(0, {'hw:mem_bw': '10'})
        self.drv.pre_live_migration(None, inst, None)
        # In flight: no domain yet, but the claim is kept.
        self.drv.rdt_host()
        self.assertEqual([inst.uuid], self.claimed())
        self.drv.post_live_migration_at_destination(None, inst, None)
        self.assertEqual(set(), self.drv._rdt_busy)
        # Rolled back: destroy (cleanup) releases.
        other = instance(1, {'hw:mem_bw': '10'})
        self.drv.pre_live_migration(None, other, None)
        self.super_rollback_live_migration_at_destination.side_effect = (
            lambda context, instance, *a, **k: self.drv.cleanup(
                context, instance, None))
        self.drv.rollback_live_migration_at_destination(None, other, None)
        self.assertNotIn(other.uuid, self.claimed())
        self.assertEqual(set(), self.drv._rdt_busy)

    def test_reconcile_reads_operations_before_domains(self):
        inst = instance(0, {'hw:mem_bw': '10'})
        # A spawn in progress: claimed, no domain yet.
        self.drv._rdt_busy.add(inst.uuid)
        self.drv._rdt_claim(inst, inst.flavor)

        def listing(only_running=True):
            # The spawn defines its domain and ends just after the
            # listing was taken.
            listed = list(self.domains)
            self.domains.append(FakeDomain(inst, {}))
            self.drv._rdt_busy.discard(inst.uuid)
            return listed

        self.drv._host.list_instance_domains.side_effect = listing
        self.drv._rdt_reconcile()
        self.assertEqual([inst.uuid], self.claimed())

    def test_reconcile_drops_claims_of_vanished_domains(self):
        kept = self.spawn(0)
        gone = self.spawn(1)
        self.domains = [d for d in self.domains if d.inst is kept]
        self.assertEqual(3, self.free_closids())
        self.assertEqual([kept.uuid], self.claimed())
        self.assertIn('Released the RDT resources of instance %s' %
                      gone.uuid, self.logger.output)

    def test_guest_config_claims_a_missing_claim_with_a_check(self):
        inst = instance(0, {'hw:mem_bw': '30'})
        guest = mock.Mock(vcpus=2, cputune=None, metadata=[])
        self.super_get_guest_config.return_value = guest
        result = self.drv._get_guest_config(inst, None, None, {})
        self.assertIs(guest, result)
        self.assertIn('<node id="0" bandwidth="30"/>',
                      guest.cputune.to_xml())
        self.assertEqual([inst.uuid], self.claimed())
        self.assertIn('Claimed RDT resources', self.logger.output)

    def test_guest_config_without_claim_on_a_full_host_fails(self):
        # A hard reboot after the claim was lost must not oversubscribe.
        self.add_groups(4)
        inst = instance(0, {'hw:mem_bw': '30'})
        self.super_get_guest_config.return_value = mock.Mock(
            vcpus=2, cputune=None, metadata=[])
        e = self.assertRaises(nova_exception.ComputeResourcesUnavailable,
                              self.drv._get_guest_config, inst, None, None,
                              {})
        self.assertIn('no free CLOSID', str(e))
        self.assertEqual([], self.claimed())

    def test_init_host_adopts_existing_domains(self):
        self.domains = [FakeDomain(instance(0), {'hw:mem_bw': '10'}),
                        FakeDomain(instance(1), {'hw:cpu_policy': 'x'}),
                        FakeDomain(instance(2), {'hw:mem_bw_mbps': '1'})]
        self.drv.init_host('host')
        self.assertEqual([UUIDS[0]], self.claimed())
        self.assertIn('cannot serve any more', self.logger.output)


class TestReporting(DriverTestCase):

    def test_stats(self):
        with open(self.state_file, 'w') as f:
            json.dump({'version': 1, 'time': time.time(), 'interval': 10,
                       'host': {'mbm_total_bps': 5e8}}, f)
        inst = instance(0, {'hw:cache_l3': '4096'})
        self.drv.spawn(None, inst)
        self.domains.append(FakeDomain(inst, {}))
        data = self.drv.get_available_resource('node')
        self.assertEqual('1', data['stats']['uptime'])
        rdt = hoststats.decode(data['stats'])
        self.assertEqual(5e8, rdt.mbw)
        self.assertEqual(3, rdt.capacity.free_closids)
        # Two free ways on cache 0 went to the instance.
        self.assertEqual({0: 0, 1: 0xc}, rdt.capacity.free_masks['L3'])
        self.assertEqual('per-instance', rdt.strategy)

    def test_stats_count_the_classes(self):
        for n, specs in enumerate([{'hw:rdt_priority': 'high'},
                                   {'hw:rdt_priority': 'low'},
                                   {'hw:rdt_priority': 'low',
                                    'hw:mem_bw': '20'},
                                   {'hw:mem_bw': '10'}]):
            inst = instance(n, specs)
            self.drv.spawn(None, inst)
            self.domains.append(FakeDomain(inst, specs))
        rdt = hoststats.decode(
            self.drv.get_available_resource('node')['stats'])
        # Both memory bandwidth domains of the reference host.
        self.assertEqual({0: (1, 2), 1: (1, 2)}, rdt.classes)
        # A low instance's percentage is in the agent's shared group.
        self.assertEqual(20, self.drv._rdt_claims.get(UUIDS[2]).plan
                         .shared_value)
        del self.domains[0]
        self.drv.cleanup(None, instance(0), None)
        rdt = hoststats.decode(
            self.drv.get_available_resource('node')['stats'])
        self.assertEqual({0: (0, 2), 1: (0, 2)}, rdt.classes)

    def test_traits(self):
        tree = provider_tree.ProviderTree()
        tree.new_root('node', '00000000-0000-4000-8000-0000000000aa')
        tree.add_traits('node', 'CUSTOM_RDT_L3_CDP', 'HW_CPU_X86_AVX',
                        'CUSTOM_RDT_MBA')
        self.drv.update_provider_tree(tree, 'node')
        self.assertEqual(
            {'HW_CPU_X86_AVX', 'CUSTOM_RDT_L3_CAT', 'CUSTOM_RDT_MBA',
             'CUSTOM_RDT_CMT', 'CUSTOM_RDT_MBM_TOTAL',
             'CUSTOM_RDT_MBM_LOCAL'},
            set(tree.data('node').traits))

    def test_libvirt_without_rdt_offers_none(self):
        self.drv._host.get_connection.return_value.getCapabilities.\
            return_value = '<capabilities><host/></capabilities>'
        rdt = hoststats.decode(self.drv.get_available_resource('n')['stats'])
        self.assertEqual({}, dict(rdt.caps.caches))
        self.assertEqual({}, dict(rdt.caps.membw))
        self.assertIsNotNone(rdt.caps.monitor)

    def test_unparsable_libvirt_capabilities(self):
        self.drv._host.get_connection.return_value.getCapabilities.\
            return_value = '<capabilities'
        rdt = hoststats.decode(self.drv.get_available_resource('n')['stats'])
        self.assertEqual({}, dict(rdt.caps.caches))
        self.assertIn('Cannot read RDT from libvirt', self.logger.output)
