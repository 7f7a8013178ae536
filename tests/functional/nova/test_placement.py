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

"""CUSTOM_RDT_CLOSID in the real placement service.

The reference tree has 8 CLOSIDs: the default group and three groups that
are not Nova's (two libvirt groups of other domains, rdt-virt-agent's
shared group) leave 4 for instances, so 4 are reserved.
"""

from unittest import mock

from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt

from tests.functional.nova import base
from tests.functional.nova import test_capacity

RC = 'CUSTOM_RDT_CLOSID'
KEYS = {'resources:CUSTOM_RDT_CLOSID': '1',
        'trait:CUSTOM_RDT_MBA': 'required'}


class PlacementTestBase(base.RDTServersTestBase):

    def closids(self, hostname):
        """(inventory record, usage) of CUSTOM_RDT_CLOSID on a host."""
        rp = self._get_provider_uuid_by_host(hostname)
        return (self._get_provider_inventory(rp).get(RC),
                self._get_provider_usages(rp).get(RC, 0))

    def reserved_and_used(self, hostname):
        inv, used = self.closids(hostname)
        return inv['reserved'], used


class RDTPlacementTest(PlacementTestBase):

    def test_inventory_and_usages_follow_boot_resize_delete(self):
        self.start_rdt_compute('host1')
        self.start_rdt_compute('host2')
        for host in ('host1', 'host2'):
            inv, used = self.closids(host)
            self.assertEqual(8, inv['total'])
            self.assertEqual(1, inv['max_unit'])
            self.assertEqual((4, 0), (inv['reserved'], used))
            self.assertIn('CUSTOM_RDT_MBA',
                          self._get_provider_traits(
                              self._get_provider_uuid_by_host(host)))
        small = self.flavor(dict(KEYS, **{'hw:mem_bw': '10'}))
        large = self.flavor(dict(KEYS, **{'hw:mem_bw': '20'}), vcpu=4)
        server = self.boot(small)
        src = server['OS-EXT-SRV-ATTR:host']
        dst = 'host2' if src == 'host1' else 'host1'
        self.assertEqual((4, 1), self.reserved_and_used(src))
        # The report after the claim does not reserve the allocated CLOSID
        # a second time.
        self._run_periodics()
        self.assertEqual((4, 1), self.reserved_and_used(src))

        # A filter-only flavor's instance is reserved instead.
        plain = self._create_server(
            flavor_id=self.flavor({'hw:mem_bw': '30'}), networks='none',
            host=src)
        self._run_periodics()
        self.assertEqual((5, 1), self.reserved_and_used(src))

        # Resize to the other host: Nova moves the allocation, the source's
        # stays with the migration until the confirm.
        server = self._resize_server(server, large)
        self.assertEqual(dst, server['OS-EXT-SRV-ATTR:host'])
        self._run_periodics()
        self.assertEqual((5, 1), self.reserved_and_used(src))
        self.assertEqual((4, 1), self.reserved_and_used(dst))
        self._confirm_resize(server)
        self._run_periodics()
        self.assertEqual((5, 0), self.reserved_and_used(src))
        self.assertEqual((4, 1), self.reserved_and_used(dst))

        self._delete_server(server)
        self._wait_until_deleted(server)
        self._delete_server(plain)
        self._wait_until_deleted(plain)
        self.assertEqual(0, self.closids(dst)[1])
        self._run_periodics()
        for host in ('host1', 'host2'):
            self.assertEqual((4, 0), self.reserved_and_used(host))
            self.assertEqual({}, self.claims(host))

    def test_boot_beyond_inventory_gets_no_valid_host(self):
        self.start_rdt_compute('one', prepare=test_capacity.leave_closids(1))
        self.assertEqual((7, 0), self.reserved_and_used('one'))
        flavor = self.flavor(dict(KEYS, **{'hw:mem_bw': '10'}))
        # Two at once for the last CLOSID: Placement refuses the request
        # as a whole, nothing reaches the compute host.
        body = self._build_server(flavor_id=flavor, networks='none')
        body.update(min_count=2, max_count=2)
        self.api.post_server({'server': body})
        servers = self.api.get_servers(detail=True)
        self.assertEqual(2, len(servers))
        for server in servers:
            server = self._wait_for_state_change(server, 'ERROR')
            self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual({}, self.claims('one'))
        self.assertEqual(0, self.closids('one')[1])
        # Nova's fault does not say why; nova-scheduler's INFO line does.
        self.assertIn(
            ': 2 instances request CUSTOM_RDT_CLOSID=1 each, and the 1 '
            'host(s) that pass RDTFilter report 1 free CLOSID(s): Placement '
            'will refuse the allocations beyond them',
            self.stdlog.logger.output)

        self.boot(flavor)
        # No report has run since: the compute node stats still show one
        # free CLOSID, and Placement's allocation refuses the next boot.
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertEqual(1, len(self.claims('one')))
        self.assertEqual((7, 1), self.reserved_and_used('one'))
        # Nothing was refused on the host: no failed build to demote it.
        self.assertEqual(0, self.computes['one'].manager.rt.stats[
            'one'].get('failed_builds', 0))

    def test_restart_keeps_allocated_closids_out_of_reserved(self):
        self.start_rdt_compute('host1')
        self.boot(self.flavor(dict(KEYS, **{'hw:mem_bw': '10'})))
        self.boot(self.flavor({'hw:mem_bw': '20'}))
        self._run_periodics()
        self.assertEqual((5, 1), self.reserved_and_used('host1'))
        # The claims come back from the domains, which do not say whether
        # Placement holds the CLOSID: the instances' flavors do. (libvirt
        # gives back the XML it was given; fakelibvirt writes its own, so
        # it returns the driver's while the compute starts.)
        original = fakelibvirt.Domain.XMLDesc

        def xml_desc(dom, flags):
            defined = dom._connection.defined.get(dom.name())
            return defined[-1] if defined else original(dom, flags)

        with mock.patch.object(fakelibvirt.Domain, 'XMLDesc', xml_desc):
            self.restart_compute_service('host1')
        self.assertEqual(2, len(self.claims('host1')))
        self._run_periodics()
        self.assertEqual((5, 1), self.reserved_and_used('host1'))

    def test_flavor_whose_keys_disagree_is_refused(self):
        self.start_rdt_compute('host1')
        # A CLOSID from Placement and no RDT policy to use it.
        flavor = self.flavor({'resources:CUSTOM_RDT_CLOSID': '1'})
        server = self.boot(flavor, expected_state='ERROR')
        message = server['fault']['message']
        self.assertIn('requests 1 CUSTOM_RDT_CLOSID, no hw: key uses one '
                      '(rdt-virt flavor-audit prints the fix)', message)
        # Refused once, not rescheduled, and the allocation is gone.
        self.assertEqual(0, self.closids('host1')[1])
        self.assertEqual({}, self.claims('host1'))


class RDTPlacementResizeTest(PlacementTestBase):
    """Casts stay casts: the compute host answers as a real cloud does."""

    CAST_AS_CALL = False

    def test_resize_to_a_flavor_whose_keys_disagree_is_refused(self):
        self.start_rdt_compute('host1')
        self.start_rdt_compute('host2')
        server = self.boot(self.flavor(dict(KEYS, **{'hw:mem_bw': '10'})))
        src = server['OS-EXT-SRV-ATTR:host']
        dst = 'host2' if src == 'host1' else 'host1'
        # Placement can serve this flavor, but the instance would not use
        # its CLOSID: the source refuses it while the instance still runs.
        stray = self.flavor({'resources:CUSTOM_RDT_CLOSID': '1'}, vcpu=4)
        self.api.post_server_action(server['id'],
                                    {'resize': {'flavorRef': stray}})
        self._wait_for_action_fail_completion(server, 'resize',
                                              'compute_resize_instance')
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(src, server['OS-EXT-SRV-ATTR:host'])
        fault = objects.InstanceFault.get_latest_for_instance(
            nova_context.get_admin_context(), server['id'])
        self.assertIn('Resize error: flavor %s requests 1 CUSTOM_RDT_CLOSID, '
                      'no hw: key uses one' % stray_name(self, stray),
                      fault.message)
        # The destination's allocation went back; the source kept its own
        # and its claim.
        self.assertEqual(1, self.closids(src)[1])
        self.assertEqual(0, self.closids(dst)[1])
        self.assertEqual([server['id']], list(self.claims(src)))


def stray_name(test, flavor_id):
    return test.api.get_flavor(flavor_id)['name']
