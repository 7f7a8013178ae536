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

"""RDTLibvirtDriver: Nova's libvirt driver with Intel RDT / AMD PQoS.

Load it with ``[DEFAULT] compute_driver = rdtvirt.RDTLibvirtDriver`` (see
:mod:`nova_plugin.loader`). On top of ``LibvirtDriver`` it:

* writes each instance's RDT policy into its domain XML
  (:mod:`rdt_virt.libvirt.elements`), for all of its vCPUs;
* claims RDT capacity for an instance under a lock when it is spawned on,
  or resized or migrated to, this host, and fails with
  ``ComputeResourcesUnavailable`` when the host has run out, which makes
  Nova reschedule a boot to an alternate host with the reason in the
  fault. Claims are released when the instance leaves the host
  (:mod:`nova_plugin.virt.claims`);
* reports capabilities and free capacity in the ``rdt_virt`` compute node
  stat for RDTFilter and RDTWeigher, and ``CUSTOM_RDT_*`` traits on its
  resource provider.
* reports its CLOSIDs as ``CUSTOM_RDT_CLOSID`` inventory in Placement, and
  refuses flavors whose ``hw:`` and Placement keys disagree
  (:mod:`nova_plugin.virt.placement`).

A host without RDT (resctrl not mounted) reports no RDT and boots
instances without RDT extra specs as the plain libvirt driver does.
"""

import contextlib
import threading

from nova import exception as nova_exception
from nova.virt.libvirt import driver as libvirt_driver
from oslo_concurrency import lockutils
from oslo_log import log as logging
from oslo_utils import excutils

from nova_plugin.virt import claims as claims_mod
from nova_plugin.virt import config as guest_config
from nova_plugin.virt import host as host_mod
from nova_plugin.virt import placement as placement_mod
from rdt_virt import conf as rdt_conf
from rdt_virt import exception
from rdt_virt.libvirt import capabilities as libvirt_caps
from rdt_virt.libvirt import elements as xml_mod
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit as fit_mod
from rdt_virt.policy import hoststats

CONF = rdt_conf.CONF
LOG = logging.getLogger(__name__)

# Serialises claims with each other and with the resource report, so the
# capacity a claim checks is the capacity the report shows.
LOCK = 'rdt-virt-claims'
TRAIT_PREFIX = 'CUSTOM_RDT_'


def policy_of(flavor):
    """The :class:`~rdt_virt.policy.extra_specs.RDTPolicy` of a flavor.

    :raises: InvalidExtraSpec for values the API would have refused
        (flavors created before rdt-virt, or below microversion 2.86).
    """
    return extra_specs.from_extra_specs(flavor.extra_specs or {})


def traits_for(caps):
    """``CUSTOM_RDT_<feature>`` for every RDT feature in ``caps``."""
    return {TRAIT_PREFIX + feature for feature in caps.features}


class RDTLibvirtDriver(libvirt_driver.LibvirtDriver):
    """The libvirt driver, with RDT allocation, claims and reporting."""

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._rdt_setup(CONF)

    def _rdt_setup(self, conf):
        """The RDT state of the driver, from ``[rdt]`` of ``conf``."""
        self._rdt_claims = claims_mod.Claims()
        # [rdt] is read once, as the rest of nova-compute's configuration.
        self._rdt_resctrl = host_mod.resctrl_for(conf)
        self._rdt_strategy = conf.rdt.mb_strategy
        self._rdt_monitoring = conf.rdt.monitoring
        self._rdt_state_file = conf.rdt.state_file
        # {resctrl resource: ids} libvirt accepts; read from libvirt's host
        # capabilities at the first use and at every resource report.
        self._rdt_libvirt_ids = None
        # uuids whose domain the driver tears down only to recreate it
        # (hard reboot, power on): cleanup() keeps their claims.
        self._rdt_recreating = set()
        # uuids in the middle of an operation that creates their domain
        # here (spawn, resize, live migration, hard reboot): the periodic
        # reconciliation keeps their claims although no domain exists yet.
        self._rdt_busy = set()
        self._rdt_sets_lock = threading.Lock()

    @contextlib.contextmanager
    def _rdt_marked(self, uuid, *sets):
        with self._rdt_sets_lock:
            for marked in sets:
                marked.add(uuid)
        try:
            yield
        finally:
            with self._rdt_sets_lock:
                for marked in sets:
                    marked.discard(uuid)

    # Host state --------------------------------------------------------

    def _rdt_read_libvirt_ids(self):
        try:
            xml = self._host.get_connection().getCapabilities()
            self._rdt_libvirt_ids = libvirt_caps.parse(xml).domain_ids()
        except exception.InvalidCapabilities as e:
            LOG.error('Cannot read RDT from libvirt\'s host capabilities, '
                      'offering no cache or memory bandwidth allocation: %s',
                      e.message)
            self._rdt_libvirt_ids = {}
        return self._rdt_libvirt_ids

    def _rdt_state(self, refresh=False):
        """Capabilities and resctrl capacity of this host (no claims).

        Values come from resctrl, which knows the mount options, shared
        ways and sparse masks; the cache and memory bandwidth ids are
        limited to those libvirt reports, since it refuses others.
        """
        ids = self._rdt_libvirt_ids
        if ids is None or refresh:
            ids = self._rdt_read_libvirt_ids()
        return host_mod.safe_read(self._rdt_resctrl, ids)

    def _rdt_fit(self, policy, caps):
        return fit_mod.fit(policy, caps, self._rdt_strategy,
                           self._rdt_monitoring)

    def _rdt_available(self, state, exclude=None):
        """Free capacity after every claim of this host.

        :param exclude: an instance uuid whose current claim is being
            replaced (not counted).
        """
        held = [c for c in self._rdt_claims.all()
                if not (exclude and c.uuid == exclude and
                        self._rdt_claims.get(exclude) is c)]
        return claims_mod.available(state.capacity, held, state.group_names,
                                    self._rdt_resctrl.prefix)

    def rdt_host(self):
        """The :class:`~rdt_virt.policy.hoststats.HostRDT` to report."""
        with lockutils.lock(LOCK):
            self._rdt_reconcile()
            state = self._rdt_state(refresh=True)
            capacity = self._rdt_available(state)
        return hoststats.HostRDT(
            caps=state.caps, capacity=capacity,
            strategy=self._rdt_strategy, monitoring=self._rdt_monitoring,
            mbw=host_mod.agent_bandwidth(self._rdt_state_file))

    def _rdt_reconcile(self):
        """Drop the claims of instances that left without cleanup().

        Nova does not call cleanup() on the source of a live migration with
        a shared instance path, nor on every evacuation; their domains are
        gone all the same. A claim whose domain is not defined here, and
        that no operation in progress is about to create, is released.
        """
        held = self._rdt_claims.all()
        if not held:
            return
        try:
            defined = {dom.UUIDString() for dom in
                       self._host.list_instance_domains(only_running=False)}
        except Exception as e:
            LOG.warning('Cannot list domains to reconcile RDT claims: %s', e)
            return
        with self._rdt_sets_lock:
            busy = set(self._rdt_busy)
        for claim in held:
            if claim.uuid in defined or claim.uuid in busy:
                continue
            if self._rdt_claims.get(claim.uuid) is claim:
                self._rdt_claims.release(claim.uuid)
            else:
                self._rdt_claims.release_previous(claim.uuid)
            LOG.info('Released the RDT resources of instance %s, which is '
                     'no longer defined on this host', claim.uuid)

    # Claims ------------------------------------------------------------

    def _rdt_claim(self, instance, flavor, keep_previous=False):
        """Claim the RDT capacity ``flavor`` needs for ``instance`` here.

        :raises: ComputeResourcesUnavailable when the host lacks the
            capability or has run out of capacity, with the reason.
        :returns: the Claim, or None when the flavor has no RDT policy.
        """
        try:
            policy = policy_of(flavor)
        except exception.InvalidExtraSpec as e:
            raise nova_exception.ComputeResourcesUnavailable(
                reason='flavor %s: %s' % (flavor.name, e.message))
        if policy.is_empty:
            if keep_previous:
                self._rdt_claims.set_aside(instance.uuid)
            return None
        with lockutils.lock(LOCK):
            state = self._rdt_state()
            try:
                plan = self._rdt_fit(policy, state.caps)
                exclude = None if keep_previous else instance.uuid
                self._rdt_available(state, exclude).check(plan)
            except (exception.HostCannotServe,
                    exception.CapacityExhausted) as e:
                LOG.warning('Cannot claim RDT resources: %s', e.message,
                            instance=instance)
                raise nova_exception.ComputeResourcesUnavailable(
                    reason=e.message)
            claim = claims_mod.Claim(
                instance.uuid, instance.name, plan,
                placement=placement_mod.closids_of(flavor))
            self._rdt_claims.add(claim, keep_previous=keep_previous)
        LOG.info('Claimed RDT resources: %s', _describe(plan),
                 instance=instance)
        return claim

    def _rdt_release(self, instance):
        claim = self._rdt_claims.release(instance.uuid)
        if claim is not None:
            LOG.info('Released RDT resources', instance=instance)
        return claim

    def _rdt_guest_plan(self, instance):
        """Policy and plan for the guest XML of ``instance``.

        The instance's claim when it has one; otherwise (an instance that
        was on this host before the driver started, or whose claim was
        lost) the plan is computed now and recorded, without failing:
        the instance already lives here.
        """
        policy = policy_of(instance.flavor)
        if policy.is_empty:
            return policy, None
        claim = self._rdt_claims.get(instance.uuid)
        if claim is not None:
            return policy, claim.plan
        state = self._rdt_state()
        try:
            plan = self._rdt_fit(policy, state.caps)
        except exception.HostCannotServe as e:
            raise nova_exception.InternalError(
                'Cannot apply the RDT policy of instance %s on this host: '
                '%s' % (instance.uuid, e.message))
        self._rdt_claims.add(claims_mod.Claim(
            instance.uuid, instance.name, plan,
            placement=placement_mod.closids_of(instance.flavor)))
        LOG.info('Adopted RDT resources: %s', _describe(plan),
                 instance=instance)
        return policy, plan

    # LibvirtDriver hooks -------------------------------------------------

    def _get_guest_config(self, instance, *args, **kwargs):
        guest = super()._get_guest_config(instance, *args, **kwargs)
        policy, plan = self._rdt_guest_plan(instance)
        if plan is not None:
            guest_config.apply(guest, xml_mod.elements(policy, plan,
                                                       guest.vcpus))
        return guest

    def prepare_for_spawn(self, instance):
        # Before networks and volumes: a flavor whose hw: and Placement
        # keys disagree fails here, once, with the reason as its fault.
        placement_mod.check_flavor(instance)
        return super().prepare_for_spawn(instance)

    def spawn(self, context, instance, *args, **kwargs):
        with self._rdt_marked(instance.uuid, self._rdt_busy):
            self._rdt_claim(instance, instance.flavor)
            try:
                return super().spawn(context, instance, *args, **kwargs)
            except Exception:
                with excutils.save_and_reraise_exception():
                    self._rdt_release(instance)

    def _hard_reboot(self, context, instance, *args, **kwargs):
        # Tears the domain down and recreates it: the claim stays.
        with self._rdt_marked(instance.uuid, self._rdt_recreating,
                              self._rdt_busy):
            return super()._hard_reboot(context, instance, *args, **kwargs)

    def rescue(self, context, instance, *args, **kwargs):
        # The domain is redefined as the rescue domain: keep the claim.
        with self._rdt_marked(instance.uuid, self._rdt_busy):
            return super().rescue(context, instance, *args, **kwargs)

    def unrescue(self, context, instance, *args, **kwargs):
        with self._rdt_marked(instance.uuid, self._rdt_busy):
            return super().unrescue(context, instance, *args, **kwargs)

    def cleanup(self, context, instance, *args, **kwargs):
        # Every way an instance leaves this host goes through cleanup():
        # delete and failed spawns (via destroy), evacuation, shelve
        # offload, the source of a live migration, a reverted resize here.
        try:
            return super().cleanup(context, instance, *args, **kwargs)
        finally:
            if instance.uuid not in self._rdt_recreating:
                self._rdt_release(instance)

    def migrate_disk_and_power_off(self, context, instance, dest, flavor,
                                   *args, **kwargs):
        # The source, before the instance stops: the last point where a
        # resize can be refused with the instance still running here.
        placement_mod.check_resize(instance, flavor)
        return super().migrate_disk_and_power_off(context, instance, dest,
                                                  flavor, *args, **kwargs)

    def finish_migration(self, context, migration, instance, *args,
                         **kwargs):
        # instance.flavor is the new flavor here; on the same host the old
        # claim stays until the resize is confirmed or reverted.
        same_host = migration.source_compute == migration.dest_compute
        with self._rdt_marked(instance.uuid, self._rdt_busy):
            self._rdt_claim(instance, instance.flavor,
                            keep_previous=same_host)
            try:
                return super().finish_migration(context, migration, instance,
                                                *args, **kwargs)
            except Exception:
                with excutils.save_and_reraise_exception():
                    self._rdt_release(instance)
                    if same_host:
                        self._rdt_claims.restore_previous(instance.uuid)

    def confirm_migration(self, context, migration, instance, network_info):
        try:
            return super().confirm_migration(context, migration, instance,
                                             network_info)
        finally:
            if migration.source_compute == migration.dest_compute:
                self._rdt_claims.release_previous(instance.uuid)
            else:
                self._rdt_release(instance)

    def finish_revert_migration(self, context, instance, *args, **kwargs):
        # A same-host revert: the new flavor's claim went with destroy().
        self._rdt_claims.restore_previous(instance.uuid)
        with self._rdt_marked(instance.uuid, self._rdt_busy):
            return super().finish_revert_migration(context, instance, *args,
                                                   **kwargs)

    def pre_live_migration(self, context, instance, *args, **kwargs):
        # The destination's claim; the instance stays busy until the
        # migration ends here (post_live_migration_at_destination) or is
        # rolled back (rollback_live_migration_at_destination, which
        # destroys, and so releases).
        with self._rdt_sets_lock:
            self._rdt_busy.add(instance.uuid)
        try:
            self._rdt_claim(instance, instance.flavor)
            return super().pre_live_migration(context, instance, *args,
                                              **kwargs)
        except Exception:
            with excutils.save_and_reraise_exception():
                self._rdt_release(instance)
                self._rdt_unbusy(instance.uuid)

    def post_live_migration_at_destination(self, context, instance, *args,
                                           **kwargs):
        try:
            return super().post_live_migration_at_destination(
                context, instance, *args, **kwargs)
        finally:
            self._rdt_unbusy(instance.uuid)

    def rollback_live_migration_at_destination(self, context, instance,
                                               *args, **kwargs):
        try:
            return super().rollback_live_migration_at_destination(
                context, instance, *args, **kwargs)
        finally:
            self._rdt_unbusy(instance.uuid)

    def _rdt_unbusy(self, uuid):
        with self._rdt_sets_lock:
            self._rdt_busy.discard(uuid)

    def init_host(self, host):
        super().init_host(host)
        self._rdt_adopt_domains()

    def _rdt_adopt_domains(self):
        """Rebuild the claims of the domains defined here after a restart."""
        state = self._rdt_state()
        adopted = 0
        for dom in self._host.list_instance_domains(only_running=False):
            try:
                policy = xml_mod.policy_from_domain(dom.XMLDesc(0))
            except Exception as e:
                LOG.warning('Cannot read the RDT policy of domain %s: %s',
                            dom.name(), e)
                continue
            if policy is None or policy.is_empty:
                continue
            try:
                plan = self._rdt_fit(policy, state.caps)
            except exception.HostCannotServe as e:
                LOG.error('Domain %s has an RDT policy this host cannot '
                          'serve any more: %s', dom.name(), e.message)
                continue
            uuid = dom.UUIDString()
            self._rdt_claims.add(claims_mod.Claim(
                uuid, dom.name(), plan,
                placement=placement_mod.stored_closids(uuid)))
            adopted += 1
        if adopted:
            LOG.info('Found RDT claims of %d existing domains', adopted)

    # Reporting -----------------------------------------------------------

    def get_available_resource(self, nodename):
        data = super().get_available_resource(nodename)
        stats = data.setdefault('stats', {})
        stats.update(hoststats.encode(self.rdt_host()))
        return data

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        previous = dict(provider_tree.data(nodename).inventory)
        super().update_provider_tree(provider_tree, nodename,
                                     allocations=allocations)
        with lockutils.lock(LOCK):
            state = self._rdt_state()
            capacity = self._rdt_available(state)
            held = self._rdt_claims.all()
        placement_mod.update_inventory(provider_tree, nodename, state.caps,
                                       capacity, held, previous)
        wanted = traits_for(state.caps)
        current = provider_tree.data(nodename).traits
        stale = {t for t in current
                 if t.startswith(TRAIT_PREFIX) and t not in wanted}
        if stale:
            provider_tree.remove_traits(nodename, *stale)
        if wanted - set(current):
            provider_tree.add_traits(nodename, *wanted)


def _describe(plan):
    parts = []
    for alloc in plan.caches:
        parts.append('%s %d ways' % (alloc.resource, alloc.ways))
    if plan.mem_bw is not None:
        parts.append('memory bandwidth %d %s (%s)' % (
            plan.mem_bw.value, plan.mem_bw.unit, plan.mb_owner))
    if plan.monitor:
        parts.append('monitoring')
    return ', '.join(parts) or 'nothing'
