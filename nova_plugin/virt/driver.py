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
* refuses a live migration it cannot fit in Nova's destination pre-check,
  and sends the destination's own plan (cache ids and sizes, memory
  bandwidth nodes) in the migrated domain XML;
* waits at start, when RDT domains are defined, for resctrl and the
  default group's reserved ways (``[rdt] host_ready_timeout``);
* reports its CLOSIDs as ``CUSTOM_RDT_CLOSID`` inventory in Placement, and
  refuses flavors whose ``hw:`` and Placement keys disagree
  (:mod:`nova_plugin.virt.placement`).

A host without RDT (resctrl not mounted) reports no RDT and boots
instances without RDT extra specs as the plain libvirt driver does.
"""

import contextlib
import threading
import time

from nova.compute import task_states
from nova.compute import vm_states
from nova import exception as nova_exception
from nova import objects
from nova.virt.libvirt import driver as libvirt_driver
from oslo_concurrency import lockutils
from oslo_log import log as logging
from oslo_utils import excutils

from nova_plugin import compat
from nova_plugin.virt import claims as claims_mod
from nova_plugin.virt import config as guest_config
from nova_plugin.virt import host as host_mod
from nova_plugin.virt import lifecycle
from nova_plugin.virt import placement as placement_mod
from nova_plugin.virt import report as report_mod
from rdt_virt import conf as rdt_conf
from rdt_virt import exception
from rdt_virt.libvirt import capabilities as libvirt_caps
from rdt_virt.libvirt import elements as xml_mod
from rdt_virt.policy import default_group
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit as fit_mod
from rdt_virt.policy import hoststats

CONF = rdt_conf.CONF
LOG = logging.getLogger(__name__)

# Serialises claims with each other and with the resource report, so the
# capacity a claim checks is the capacity the report shows.
LOCK = 'rdt-virt-claims'
TRAIT_PREFIX = 'CUSTOM_RDT_'
# Seconds between two looks at resctrl while waiting for it at start.
READY_POLL_INTERVAL = 0.5


class CapacityReschedule(nova_exception.GroupAffinityViolation):
    """A new instance does not fit here after all: try another host.

    Raised from spawn() of a build instead of ComputeResourcesUnavailable.
    Nova reschedules both, but counts ComputeResourcesUnavailable as a
    failed build, and BuildFailureWeigher then sends every request, RDT or
    not, away from this host. A build refused for a server group policy
    (GroupAffinityViolation) is rescheduled without that penalty: losing
    a race for the last CLOSID is no sign of a broken host either.
    """

    msg_fmt = 'Insufficient compute resources: %(reason)s.'


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
        self._rdt_ready_timeout = conf.rdt.host_ready_timeout
        self._rdt_reserved_ways = conf.rdt.default_group_l3_ways
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
        # {uuid: task states} of instances whose domain is destroyed only
        # to be created again here (a rebuild between destroy() and
        # spawn(), a same-host revert between destroy() and
        # finish_revert_migration()): their claims stay while the
        # instance's task state is one of those.
        self._rdt_pending = {}
        # uuids live migrating to this host: claimed at pre_live_migration,
        # kept until Nova's Migration record says the migration ended.
        self._rdt_incoming = set()
        self._rdt_sets_lock = threading.Lock()
        # The compute host's name, from init_host().
        self._rdt_hostname = None

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
        held = [c for c in self._rdt_claims.current()
                if not (exclude and c.uuid == exclude)]
        return claims_mod.available(
            state.capacity, held, state.group_names,
            self._rdt_resctrl.prefix, machines=self._rdt_machines(),
            previous=self._rdt_claims.previous())

    def _rdt_machines(self):
        """{uuid: libvirt machine name} of the domains running here.

        A claim counts as present in resctrl only through the groups of
        its own running domain. Without the list, none does: claims are
        then counted twice rather than not at all.
        """
        try:
            return {dom.UUIDString(): claims_mod.machine_name(dom.ID(),
                                                              dom.name())
                    for dom in self._host.list_instance_domains(
                        only_running=True)}
        except Exception as e:
            LOG.warning('Cannot list running domains to match their '
                        'resctrl groups: %s', e)
            return {}

    def rdt_host(self, reconcile=True):
        """The :class:`~rdt_virt.policy.hoststats.HostRDT` to report.

        :param reconcile: False to count the claims as they are, without
            looking for instances that left without cleanup() (the
            periodic report does that).
        """
        with lockutils.lock(LOCK):
            if reconcile:
                self._rdt_reconcile()
            state = self._rdt_state(refresh=True)
            capacity = self._rdt_available(state)
            held = self._rdt_claims.current()
            # Every instance held here, stopped ones too: they come back
            # with their class.
            priorities = [c.plan.priority for c in held]
        mb = state.caps.mb
        return hoststats.HostRDT(
            caps=state.caps, capacity=capacity,
            strategy=self._rdt_strategy, monitoring=self._rdt_monitoring,
            mbw=host_mod.agent_bandwidth(self._rdt_state_file),
            classes=hoststats.count_classes(
                priorities, mb.domain_ids if mb else ()),
            # Named in the periodic report only (see
            # nova_plugin.scheduler.state.HostView.follow).
            claimed=frozenset(c.uuid for c in held) if reconcile else None)

    def _rdt_reconcile(self):
        """Drop the claims of instances that left without cleanup().

        Nova does not call cleanup() on the source of a live migration with
        a shared instance path, nor on every evacuation; it does not tell
        the destination of a live migration with a shared instance path
        that the migration failed. A claim is released when no operation
        in progress here is about to (re)create its domain and either its
        domain is not defined here, or it is defined but stopped and Nova's
        records place the instance on another host for good (a resize that
        failed at its destination).
        """
        held = self._rdt_claims.all()
        if not held:
            return
        # The operations in progress are read before the domains: one that
        # ends after this read has defined its domain before it ended, so
        # the listing below shows it.
        with self._rdt_sets_lock:
            busy = set(self._rdt_busy)
            pending = dict(self._rdt_pending)
            incoming = set(self._rdt_incoming)
        uuids = {c.uuid for c in held}
        for uuid in incoming & uuids:
            if lifecycle.live_migration_over(uuid):
                LOG.info('The live migration of instance %s to this host '
                         'has ended', uuid)
                self._rdt_unbusy(uuid)
                busy.discard(uuid)
        for uuid, states in pending.items():
            if uuid not in uuids:
                continue
            if lifecycle.task_state_in(uuid, states):
                busy.add(uuid)
            else:
                with self._rdt_sets_lock:
                    self._rdt_pending.pop(uuid, None)
        try:
            domains = self._host.list_instance_domains(only_running=False)
            defined = {dom.UUIDString(): bool(dom.isActive())
                       for dom in domains}
        except Exception as e:
            LOG.warning('Cannot list domains to reconcile RDT claims: %s', e)
            return
        for claim in held:
            if claim.uuid in busy:
                continue
            if claim.uuid in defined:
                if defined[claim.uuid] or not lifecycle.left_host(
                        claim.uuid, self._rdt_hostname):
                    continue
                why = 'which now lives on another host'
            else:
                why = 'which is no longer defined on this host'
            if self._rdt_claims.get(claim.uuid) is claim:
                self._rdt_claims.release(claim.uuid)
            else:
                self._rdt_claims.release_previous(claim.uuid)
            LOG.info('Released the RDT resources of instance %s, %s',
                     claim.uuid, why)

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

        The instance's claim when it has one. Without one (its claim was
        released when a resize failed at this host, or it could not be
        adopted at start), the domain is only created if the host still
        has the capacity, which is then claimed: recovering an instance
        with a hard reboot never oversubscribes the host.

        :raises: ComputeResourcesUnavailable when the capacity is gone.
        """
        policy = policy_of(instance.flavor)
        if policy.is_empty:
            return policy, None
        claim = self._rdt_claims.get(instance.uuid)
        if claim is not None:
            return policy, claim.plan
        claim = self._rdt_claim(instance, instance.flavor)
        return policy, claim.plan

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
            if not self._rdt_rebuilt(instance):
                try:
                    self._rdt_claim(instance, instance.flavor)
                except nova_exception.ComputeResourcesUnavailable as e:
                    if instance.vm_state != vm_states.BUILDING:
                        raise
                    raise CapacityReschedule(reason=e.kwargs['reason'])
            try:
                return super().spawn(context, instance, *args, **kwargs)
            except Exception:
                with excutils.save_and_reraise_exception():
                    self._rdt_release(instance)

    def _rdt_rebuilt(self, instance):
        """True if ``instance`` is rebuilt here and keeps its claim.

        A same-host rebuild destroys the domain and spawns it again with
        the same flavor. Nova assumes that cannot fail for lack of
        resources, so the claim taken before is reused without a check.
        """
        with self._rdt_sets_lock:
            if self._rdt_pending.get(instance.uuid) != lifecycle.REBUILD:
                return False
            del self._rdt_pending[instance.uuid]
        if self._rdt_claims.get(instance.uuid) is None:
            return False
        LOG.info('Reusing the RDT resources of the rebuilt instance',
                 instance=instance)
        return True

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
        # A rebuild here destroys the domain only to spawn it again.
        # So does a resize reverted on this host, before it creates the
        # domain of the old flavor, whose claim waits as the previous one.
        pending = None
        if (self._rdt_hostname is not None and
                instance.host == self._rdt_hostname):
            if instance.task_state == task_states.REBUILDING:
                pending = lifecycle.REBUILD
            elif (instance.task_state == task_states.RESIZE_REVERTING and
                    self._rdt_claims.has_previous(instance.uuid)):
                pending = lifecycle.REVERT
        try:
            return super().cleanup(context, instance, *args, **kwargs)
        finally:
            if pending is lifecycle.REBUILD and self._rdt_claims.get(
                    instance.uuid) is not None:
                with self._rdt_sets_lock:
                    self._rdt_pending[instance.uuid] = pending
            else:
                if pending is lifecycle.REVERT:
                    with self._rdt_sets_lock:
                        self._rdt_pending[instance.uuid] = pending
                if instance.uuid not in self._rdt_recreating:
                    self._rdt_release(instance)
                    self._rdt_publish()

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
            self._rdt_publish()

    def finish_revert_migration(self, context, instance, *args, **kwargs):
        # A same-host revert: the new flavor's claim went with destroy().
        self._rdt_claims.restore_previous(instance.uuid)
        try:
            with self._rdt_marked(instance.uuid, self._rdt_busy):
                return super().finish_revert_migration(context, instance,
                                                       *args, **kwargs)
        finally:
            with self._rdt_sets_lock:
                self._rdt_pending.pop(instance.uuid, None)

    def check_can_live_migrate_destination(self, context, instance,
                                           src_compute_info, dst_compute_info,
                                           *args, **kwargs):
        # The destination, before the conductor commits to it: refusing
        # with MigrationPreCheckError makes it try the next host.
        self._rdt_precheck_incoming(instance, src_compute_info)
        return super().check_can_live_migrate_destination(
            context, instance, src_compute_info, dst_compute_info,
            *args, **kwargs)

    def _rdt_precheck_incoming(self, instance, src_compute_info):
        """Refuse a live migration here if the instance's plan cannot fit.

        The check pre_live_migration's claim repeats; nothing is claimed
        yet.

        :raises: MigrationPreCheckError with the reason.
        """
        try:
            policy = policy_of(instance.flavor)
        except exception.InvalidExtraSpec as e:
            raise nova_exception.MigrationPreCheckError(
                reason='flavor %s: %s' % (instance.flavor.name, e.message))
        if policy.is_empty:
            return
        with lockutils.lock(LOCK):
            state = self._rdt_state()
            try:
                plan = self._rdt_fit(policy, state.caps)
                self._rdt_available(state, instance.uuid).check(plan)
            except (exception.HostCannotServe,
                    exception.CapacityExhausted) as e:
                LOG.warning('Refusing a live migration to this host: %s',
                            e.message, instance=instance)
                raise nova_exception.MigrationPreCheckError(
                    reason='RDT on %s: %s' % (self._rdt_hostname or
                                              'the destination', e.message))
        source = hoststats.decode((src_compute_info or {}).get('stats'))
        if source is not None:
            try:
                source_plan = fit_mod.fit(policy, source.caps,
                                          source.strategy, source.monitoring)
            except exception.HostCannotServe:
                source_plan = None
            if source_plan != plan:
                LOG.info('The instance gets this host\'s RDT plan (%s) '
                         'in place of its source\'s', _describe(plan),
                         instance=instance)

    def _live_migration_operation(self, context, instance, dest,
                                  block_migration, migrate_data, guest,
                                  device_names):
        # The source: Nova starts the destination's XML from the migratable
        # XML of the running guest, which carries this host's cache ids,
        # sizes and memory bandwidth nodes. The guest handed on gives the
        # destination's plan instead.
        elements = self._rdt_destination_elements(context, instance, dest)
        if elements is not None:
            guest = MigratingGuest(guest, elements)
        return super()._live_migration_operation(
            context, instance, dest, block_migration, migrate_data, guest,
            device_names)

    def _rdt_destination_elements(self, context, instance, dest):
        """The RDT elements of ``instance`` on host ``dest``, or None.

        From what ``dest`` reports (its capabilities, strategy and
        monitoring default), the same fit its pre_live_migration claimed
        with.

        :raises: MigrationError when ``dest`` reports no RDT or cannot
            serve the flavor (its pre-check would have refused it).
        """
        policy = policy_of(instance.flavor)
        if policy.is_empty:
            return None
        try:
            nodes = objects.ComputeNodeList.get_all_by_host(context, dest)
            reported = [hoststats.decode(node.stats) for node in nodes]
            rdt = next(r for r in reported if r is not None)
            plan = fit_mod.fit(policy, rdt.caps, rdt.strategy,
                               rdt.monitoring)
        except (nova_exception.NovaException, StopIteration,
                exception.HostCannotServe) as e:
            raise nova_exception.MigrationError(
                reason='cannot plan the RDT resources of the instance on '
                       '%s: %s' % (dest, getattr(e, 'message', None) or
                                   'it reports no RDT'))
        LOG.info('Live migrating with the RDT plan of %s: %s', dest,
                 _describe(plan), instance=instance)
        return xml_mod.elements(policy, plan, instance.flavor.vcpus)

    def pre_live_migration(self, context, instance, *args, **kwargs):
        # The destination's claim; the instance stays busy until the
        # migration ends here (post_live_migration_at_destination) or is
        # rolled back (rollback_live_migration_at_destination, which
        # destroys, and so releases).
        with self._rdt_sets_lock:
            self._rdt_busy.add(instance.uuid)
            self._rdt_incoming.add(instance.uuid)
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

    def post_live_migration_at_source(self, context, instance,
                                      network_info):
        # The instance runs at the destination now; Nova does not call
        # cleanup() here when the instance path is shared.
        try:
            return super().post_live_migration_at_source(
                context, instance, network_info)
        finally:
            self._rdt_release(instance)
            self._rdt_publish()

    def _rdt_unbusy(self, uuid):
        with self._rdt_sets_lock:
            self._rdt_busy.discard(uuid)
            self._rdt_incoming.discard(uuid)

    def init_host(self, host):
        self._rdt_hostname = host
        super().init_host(host)
        self._rdt_wait_for_host()
        self._rdt_adopt_domains()

    def _rdt_wait_for_host(self):
        """Wait until the host's RDT can serve the domains defined here.

        After a host reboot, nova-compute may start before resctrl is
        mounted or before rdt-virt-agent has shrunk the default group to
        its reserved ways; the domains it then counts and starts again
        (``resume_guests_state_on_host_boot``) would find no RDT, or no
        free ways, and go to ERROR. Only hosts with domains that have an
        RDT policy wait, at most ``[rdt] host_ready_timeout`` seconds; if
        the ways are still not reserved then, the driver reserves them.
        """
        policies = []
        try:
            domains = self._host.list_instance_domains(only_running=False)
        except Exception as e:
            LOG.warning('Cannot list the domains defined here: %s', e)
            domains = []
        for dom in domains:
            try:
                policy = compat.domain_policy(dom.XMLDesc(0),
                                              dom.UUIDString())
            except Exception:
                continue
            if policy is not None and not policy.is_empty:
                policies.append(policy)
        if not policies or not self._rdt_ready_timeout:
            return
        ways = self._rdt_reserved_ways if any(
            p.wants_cache for p in policies) else 0
        start = time.monotonic()
        deadline = start + self._rdt_ready_timeout
        missing = self._rdt_host_missing(ways)
        if missing is None:
            return
        LOG.warning('Waiting up to %d s for %s before counting and starting '
                    'the %d domains with an RDT policy defined here',
                    self._rdt_ready_timeout, missing, len(policies))
        while missing is not None and time.monotonic() < deadline:
            time.sleep(READY_POLL_INTERVAL)
            missing = self._rdt_host_missing(ways)
        if missing is None:
            LOG.info('The host\'s RDT is ready after %.1f s',
                     time.monotonic() - start)
            return
        if not self._rdt_resctrl.is_mounted():
            LOG.error('resctrl is still not mounted at %s after %d s: the '
                      'domains with an RDT policy cannot start. Check that '
                      'sys-fs-resctrl.mount is enabled.',
                      self._rdt_resctrl.root, self._rdt_ready_timeout)
            return
        self._rdt_reserve_ways(ways)

    def _rdt_reserved(self, ways):
        """The default group's reserved schemata, or {} for none."""
        if not ways:
            return {}
        try:
            return default_group.reserved_schemata(
                self._rdt_resctrl.capabilities(), ways)
        except exception.InvalidConfig as e:
            LOG.error('%s; the default group keeps its L3 mask', e)
            return {}

    def _rdt_host_missing(self, ways):
        """What the host lacks for RDT domains to start, or None."""
        if not self._rdt_resctrl.is_mounted():
            return 'resctrl to be mounted at %s' % self._rdt_resctrl.root
        try:
            reserved = self._rdt_reserved(ways)
            if reserved and default_group.needs_update(
                    self._rdt_resctrl.read_schemata(None), reserved):
                return ('rdt-virt-agent to leave the default resctrl group '
                        'its %d reserved L3 ways ([rdt] '
                        'default_group_l3_ways)' % ways)
        except (OSError, exception.RDTVirtException) as e:
            return 'resctrl to be readable (%s)' % e
        return None

    def _rdt_reserve_ways(self, ways):
        """Shrink the default group to its reserved ways as the agent does."""
        reserved = self._rdt_reserved(ways)
        try:
            # A partial schemata: the kernel changes only these lines.
            self._rdt_resctrl.write_schemata(None, reserved)
        except (OSError, exception.RDTVirtException) as e:
            LOG.error('rdt-virt-agent did not reserve the default group\'s '
                      '%d L3 ways within %d s and nova-compute cannot do it '
                      '(%s): instances with cache allocations may fail to '
                      'start. Check rdt-virt-agent.service.', ways,
                      self._rdt_ready_timeout, e)
            return
        LOG.warning('rdt-virt-agent did not reserve the default group\'s %d '
                    'L3 ways within %d s: nova-compute reserved them itself. '
                    'Check rdt-virt-agent.service.', ways,
                    self._rdt_ready_timeout)

    def _rdt_adopt_domains(self):
        """Rebuild the claims of the domains defined here after a restart.

        Running domains first: their groups are in resctrl, so they fit.
        A stopped domain is adopted only if the host can still hold it;
        otherwise starting it later claims with a check, and fails with a
        clear fault if the capacity is gone.
        """
        state = self._rdt_state()
        domains = sorted(self._host.list_instance_domains(only_running=False),
                         key=lambda dom: not dom.isActive())
        adopted = 0
        for dom in domains:
            try:
                policy = compat.domain_policy(dom.XMLDesc(0),
                                              dom.UUIDString())
            except Exception as e:
                LOG.warning('Cannot read the RDT policy of domain %s: %s',
                            dom.name(), e)
                continue
            if policy is None or policy.is_empty:
                continue
            try:
                plan = self._rdt_fit(policy, state.caps)
                if not dom.isActive():
                    with lockutils.lock(LOCK):
                        self._rdt_available(state).check(plan)
            except (exception.HostCannotServe,
                    exception.CapacityExhausted) as e:
                LOG.error('Domain %s has an RDT policy this host cannot '
                          'serve any more; it keeps no RDT resources until '
                          'it starts again: %s', dom.name(), e.message)
                continue
            self._rdt_adopt_previous(state, dom)
            uuid = dom.UUIDString()
            self._rdt_claims.add(claims_mod.Claim(
                uuid, dom.name(), plan,
                placement=placement_mod.stored_closids(uuid)),
                keep_previous=True)
            adopted += 1
        if adopted:
            LOG.info('Found RDT claims of %d existing domains', adopted)

    def _rdt_adopt_previous(self, state, dom):
        """The old flavor's claim of a same-host resize not yet confirmed.

        Its domain is gone until a revert, so only Nova's records tell of
        it; without it, a revert would find its capacity taken.
        """
        old_flavor = lifecycle.same_host_resize_old_flavor(
            dom.UUIDString(), self._rdt_hostname)
        if old_flavor is None:
            return
        try:
            policy = policy_of(old_flavor)
            if policy.is_empty:
                return
            plan = self._rdt_fit(policy, state.caps)
            with lockutils.lock(LOCK):
                self._rdt_available(state).check(plan)
        except (exception.InvalidExtraSpec, exception.HostCannotServe,
                exception.CapacityExhausted) as e:
            LOG.error('Cannot keep the RDT resources of the old flavor of '
                      'domain %s, resized on this host; a revert will need '
                      'them: %s', dom.name(), e.message)
            return
        self._rdt_claims.add(claims_mod.Claim(dom.UUIDString(), dom.name(),
                                              plan))
        LOG.info('Found the RDT claim of the old flavor of domain %s, '
                 'resized on this host', dom.name())

    # Reporting -----------------------------------------------------------

    def _rdt_publish(self):
        """Refresh the reported RDT stat now: an instance left or gave back.

        Whether or not the instance held anything: the scheduler goes back
        to the last report when a host's instance count goes down, so that
        report must count every claim made since the periodic one.
        """
        try:
            report_mod.publish(self.virtapi, self._host.get_hostname(),
                               self.rdt_host(reconcile=False))
        except Exception as e:
            # The periodic report still comes; a deletion must not fail.
            LOG.warning('Cannot refresh the RDT stat after an instance '
                        'left: %s', e)

    def get_available_resource(self, nodename):
        data = super().get_available_resource(nodename)
        stats = data.setdefault('stats', {})
        stats.update(report_mod.stats_of(self.rdt_host()))
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


class MigratingGuest(object):
    """A Guest whose migratable XML carries another host's RDT elements.

    Everything else is the wrapped guest's.
    """

    def __init__(self, guest, elements):
        self._guest = guest
        self._rdt_elements = elements

    def get_xml_desc(self, *args, **kwargs):
        xml = self._guest.get_xml_desc(*args, **kwargs)
        if kwargs.get('dump_migratable'):
            xml = xml_mod.replace(xml, self._rdt_elements)
        return xml

    def __getattr__(self, name):
        return getattr(self._guest, name)


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
