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

"""What RDTFilter and RDTWeigher know about requests and hosts, cached.

The filter runs once per host per request, on thousands of hosts, so it must
not parse anything there:

* **Requests**: the flavor's extra specs are parsed into an
  :class:`~rdt_virt.policy.extra_specs.RDTPolicy` once per RequestSpec
  (:func:`request_view`). The filter and the weigher of one request run in
  the same thread, so a thread-local entry keyed on the RequestSpec object
  serves both.
* **Hosts**: the ``rdt_virt`` compute node stat is decoded once per change
  (:func:`host_view`), cached on the HostState itself. The cache is keyed on
  the identity of ``HostState.stats`` first; because
  ``HostState.update()`` replaces that dict with a freshly loaded copy on
  every scheduling request, an equal raw string of the same report
  (``hoststats.REPORT_KEY``) keeps the decoded state too.
* **Fit**: :func:`~rdt_virt.policy.fit.fit` depends only on the policy and
  on the host's capabilities, strategy and monitoring default, which hosts
  of the same hardware share. Plans are cached per policy and per distinct
  capability set; the capacity check of a plan is cached per host until
  its stats change.

The scheduler therefore runs the same ``fit()`` and ``Capacity.check()`` as
the compute host, at the cost of a few dictionary lookups per host.

* **Consumption**: a host's stats change only at its next resource report,
  and Nova's ``HostState.consume_from_request`` updates none of rdt-virt's
  values; it does count ``num_instances`` up. When a host's count has grown
  since the last RDT request it passed, an instance landed there: that
  request's plan is taken from the host's capacity until the next report.
  So the instances of a multi-create request, and of requests scheduled one
  after the other, do not all get the same last CLOSID. When the count
  goes down (placements undone by a request that failed, instances
  deleted), the estimate goes back to the host's last report, which the
  compute host refreshes whenever an instance leaves it
  (:mod:`nova_plugin.virt.report`): the capacity a deleted instance held
  is free for the next request, not only after the next periodic
  report. A periodic report names the instances whose claims it counts:
  one that landed while the host took it (counted in the host's instances,
  its claim not yet taken) is still taken from the new report
  (:meth:`HostView.follow`). (An instance placed but not yet claimed on
  its host when a refresh was taken as another left is missing from
  it: the race for the last CLOSID described in
  :mod:`nova_plugin.scheduler.filters`.) (A plain instance that lands
  right after an RDT request passed a host makes the estimate
  pessimistic until the next report.)
"""

import dataclasses
import itertools
import threading

from oslo_log import log as logging

from rdt_virt import exception
from rdt_virt.policy import capacity as capacity_mod
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit as fit_mod
from rdt_virt.policy import hoststats
from rdt_virt.policy import placement

LOG = logging.getLogger(__name__)

# Attribute of nova.scheduler.host_manager.HostState holding its HostView.
HOST_ATTR = '_rdt_virt_view'

# Bounds of the process-wide caches; distinct flavors and hardware variants
# are few, so reaching them means something unexpected: start over.
_MAX_POLICIES = 1024
_MAX_CAPS = 4096

_caps_ids = {}
_caps_counter = itertools.count()
_fits = {}
_local = threading.local()
# {(host, node): HostView}
_views = {}
_MAX_HOSTS = 100000


class RequestView(object):
    """The RDT policy of one RequestSpec, parsed once."""

    __slots__ = ('spec', 'flavor', 'policy', 'error', 'placement', 'fits',
                 'noted', 'uuid')

    def __init__(self, spec, flavor, policy, error, in_placement=False):
        self.spec = spec
        self.flavor = flavor
        # None when the flavor asks nothing of RDT (no RDT extra spec, or
        # only hw:rdt_monitor=false or hw:rdt_priority=normal).
        self.policy = policy
        # Why the extra specs are unusable (conflicting keys), or None.
        self.error = error
        # True when the flavor requests its CLOSID from Placement, which
        # has then counted it atomically: the filter leaves CLOSIDs out.
        self.placement = in_placement
        # {caps id: Plan, or the reason the hardware cannot serve}, shared
        # by every request with the same policy.
        self.fits = (_fits_for((policy, in_placement)) if policy is not None
                     and error is None else None)
        # True once the filter logged what Placement will refuse of this
        # multi-create request (once per request, not per instance).
        self.noted = False
        # The instance being scheduled: set by request_view() for each
        # instance of a multi-create request, which shares one RequestSpec.
        self.uuid = None

    @property
    def active(self):
        """True if the request has RDT extra specs."""
        return self.policy is not None


def _fits_for(key):
    # Keyed on the placement flag too: verdicts are cached per plan object,
    # and the two kinds of request check capacity differently.
    fits = _fits.get(key)
    if fits is None:
        if len(_fits) >= _MAX_POLICIES:
            _fits.clear()
        fits = _fits.setdefault(key, {})
    return fits


def request_view(spec_obj):
    """The :class:`RequestView` of a RequestSpec (cached per object).

    Keyed on the RequestSpec and its flavor object: a RequestSpec is
    deserialised anew for every scheduling call, and a resize replaces its
    flavor.
    """
    flavor = spec_obj.flavor
    view = getattr(_local, 'request', None)
    if (view is not None and view.spec is spec_obj and
            view.flavor is flavor):
        view.uuid = _instance_uuid(spec_obj)
        return view
    specs = getattr(flavor, 'extra_specs', None) or {}
    policy, error, in_placement = None, None, False
    try:
        parsed = extra_specs.from_extra_specs(specs)
        # hw:rdt_monitor=false or hw:rdt_priority=normal alone asks
        # nothing of a host.
        if (parsed.wants_cache or parsed.wants_mem_bw or parsed.monitor or
                parsed.classed):
            policy = parsed
            in_placement = placement_closids(specs) > 0
    except exception.InvalidExtraSpec as e:
        # The API validates one key at a time; conflicting keys get here.
        policy, error = extra_specs.EMPTY, e.message
        LOG.warning('Flavor %(flavor)s cannot be scheduled: %(error)s',
                    {'flavor': getattr(flavor, 'name', '?'), 'error': error})
    view = RequestView(spec_obj, flavor, policy, error, in_placement)
    view.uuid = _instance_uuid(spec_obj)
    _local.request = view
    return view


def placement_closids(specs):
    try:
        return placement.requested_closids(specs) or 0
    except ValueError:
        # Not a number: Placement refuses the request before any filter.
        return 0


def _caps_id(rdt):
    # Everything fit() looks at; equal for hosts of the same hardware and
    # configuration.
    key = (repr(rdt.caps), rdt.strategy, rdt.monitoring)
    ident = _caps_ids.get(key)
    if ident is None:
        if len(_caps_ids) >= _MAX_CAPS:
            _caps_ids.clear()
        ident = _caps_ids.setdefault(key, next(_caps_counter))
    return ident


class Verdict(object):
    """What a host can do for one plan: a refusal reason or its headroom.

    ``mbw`` is the host's measured memory bandwidth (None when unknown or
    for a refusal), ``high`` the number of high-priority instances on its
    memory bandwidth domain that has the most, for the weigher. ``cause``
    is the refusal reason without what differs from host to host, by which
    the filter counts the hosts it refused.
    """

    __slots__ = ('plan', 'reason', 'headroom', 'mbw', 'high', 'cause')

    def __init__(self, plan, reason, headroom=None, mbw=None, high=0,
                 cause=None):
        self.plan = plan
        self.reason = reason
        self.headroom = headroom
        self.mbw = mbw
        self.high = high
        self.cause = cause or reason


class HostView(object):
    """The decoded RDT state of one HostState."""

    __slots__ = ('stats', 'raw', 'report', 'rdt', 'caps_id', 'verdicts',
                 'seen', 'pending', 'pending_uuid')

    def __init__(self, stats, raw, report=None):
        self.stats = stats
        self.raw = raw
        # The report's name (hoststats.REPORT_KEY): a later report equal
        # in content is a new report, counted afresh.
        self.report = report
        # HostRDT, or None for a host without rdt-virt's driver.
        self.rdt = hoststats.decode({hoststats.KEY: raw}) if raw else None
        self.caps_id = _caps_id(self.rdt) if self.rdt else None
        # {id(plan): Verdict}; plans live in the fit cache, the Verdict
        # keeps its plan alive so the id cannot be reused meanwhile.
        self.verdicts = {}
        # HostState.num_instances when last looked at, and the plan of the
        # last RDT request this host passed then (None if it refused it)
        # with its instance's UUID.
        self.seen = None
        self.pending = None
        self.pending_uuid = None

    def follow(self, old):
        """Take over what ``old``, the previous report's view, waited for.

        A periodic report names the instances whose claims it counts
        (``HostRDT.claimed``). The host takes it in two steps: the claims
        first, the instance count (``num_instances``) later. An instance
        that the last RDT request passed here may land between them:
        counted in ``num_instances``, not in the capacity. When the new
        report does not name that instance, :func:`verdict` still takes
        its plan once the count shows it landed. A report that names it,
        one taken when an instance left (no names: the count it goes with
        may still hold the instance that left) and a report of an older
        rdt-virt start afresh, as before.
        """
        claimed = self.rdt.claimed if self.rdt is not None else None
        if (claimed is not None and old.pending is not None and
                old.pending_uuid not in claimed):
            self.seen, self.pending = old.seen, old.pending
            self.pending_uuid = old.pending_uuid

    def counts(self, uuid):
        """True if this view's report counts the claim of ``uuid``."""
        claimed = self.rdt.claimed
        return claimed is not None and uuid is not None and uuid in claimed

    def consume(self, plan):
        """Take ``plan`` from the capacity until the next report.

        A high or low instance counts in the host's classes too, so the
        instances of one multi-create request spread as the weigher wants.
        """
        rdt = self.rdt
        classes = rdt.classes
        if plan.priority != extra_specs.PRIORITY_NORMAL and rdt.caps.mb:
            classes = hoststats.add_instance(classes, plan.priority,
                                             rdt.caps.mb.domain_ids)
        self.rdt = dataclasses.replace(
            rdt, capacity=capacity_mod.consume(rdt.capacity, plan),
            classes=classes)
        self.verdicts = {}

    def reset(self):
        """Forget what was consumed: back to the host's last report."""
        self.rdt = hoststats.decode({hoststats.KEY: self.raw})
        self.verdicts = {}

    def fit(self, request):
        """The Plan for ``request`` here, or a refusal :class:`Verdict`.

        Shared by every host of the same hardware and configuration.
        """
        fits = request.fits
        plan = fits.get(self.caps_id)
        if plan is None:
            rdt = self.rdt
            try:
                plan = fit_mod.fit(request.policy, rdt.caps, rdt.strategy,
                                   rdt.monitoring)
            except exception.HostCannotServe as e:
                plan = Verdict(None, e.reason, cause=e.cause)
            fits[self.caps_id] = plan
        return plan

    def verdict(self, request):
        """The :class:`Verdict` of this host for ``request``.

        :returns: a Verdict whose ``reason`` is None when the host can take
            the request now.
        """
        if self.rdt is None:
            return _NO_RDT
        plan = self.fit(request)
        if plan.__class__ is Verdict:
            return plan
        verdict = self.verdicts.get(id(plan))
        if verdict is not None and verdict.plan is plan:
            return verdict
        rdt = self.rdt
        try:
            rdt.capacity.check(plan, closids=not request.placement)
            verdict = Verdict(plan, None, headroom(rdt, plan), rdt.mbw,
                              rdt.most_high)
        except exception.CapacityExhausted as e:
            verdict = Verdict(plan, e.reason, cause=e.cause)
        self.verdicts[id(plan)] = verdict
        return verdict


_NO_RDT = Verdict(None, 'the host reports no RDT (no rdt-virt driver)')


def host_view(host_state):
    """The :class:`HostView` of a HostState, decoded once per change.

    Views are also kept per compute node, for HostStates that the
    scheduler creates anew for a request: what the scheduler placed on a
    node since its last report must outlive them.
    """
    stats = host_state.stats
    view = host_state.__dict__.get(HOST_ATTR)
    if view is not None and view.stats is stats:
        return view
    raw = stats.get(hoststats.KEY) if stats else None
    report = stats.get(hoststats.REPORT_KEY) if stats else None
    key = (host_state.host, host_state.nodename)
    if view is None:
        view = _views.get(key)
    if view is not None and view.raw == raw and view.report == report:
        view.stats = stats
        setattr(host_state, HOST_ATTR, view)
        return view
    old, view = view, HostView(stats, raw, report)
    if old is not None:
        view.follow(old)
    setattr(host_state, HOST_ATTR, view)
    if len(_views) >= _MAX_HOSTS:
        _views.clear()
    _views[key] = view
    return view


def verdict(host_state, request):
    """The :class:`Verdict` of a HostState for ``request``.

    :func:`host_view` and :meth:`HostView.verdict` in one call, with their
    cache hits inline: this runs for every host of every RDT request.
    """
    view = host_state.__dict__.get(HOST_ATTR)
    stats = host_state.stats
    if view is None or view.stats is not stats:
        # HostState.update() gives every request a new stats dict holding
        # the same report string: the common case, kept to an identity
        # test (host_view() compares by value and keys a dict). The
        # report's name still decides, as in host_view().
        if view is not None and stats and view.raw and (
                stats.get(hoststats.KEY) is view.raw) and (
                stats.get(hoststats.REPORT_KEY) == view.report):
            view.stats = stats
        else:
            view = host_view(host_state)
    count = host_state.num_instances
    if count != view.seen and view.rdt is not None:
        if view.seen is not None and count < view.seen:
            # Fewer instances than counted: the scheduler's placements were
            # undone (a request that failed) or instances left.
            view.reset()
        elif (view.pending is not None and view.seen is not None and
                not view.counts(view.pending_uuid)):
            # An instance landed here since the last RDT request passed,
            # and the report does not count it yet.
            view.consume(view.pending)
        view.seen = count
    found = None
    plan = request.fits.get(view.caps_id)
    if plan is not None and plan.__class__ is not Verdict:
        found = view.verdicts.get(id(plan))
        if found is None or found.plan is not plan:
            found = None
    if found is None:
        found = view.verdict(request)
    if found.reason is None:
        view.pending = found.plan
        view.pending_uuid = request.uuid
    else:
        view.pending = None
    return found


def _instance_uuid(spec_obj):
    # Set per instance by the scheduler, also in a multi-create request.
    try:
        return spec_obj.instance_uuid
    except Exception:
        return None


def headroom(rdt, plan):
    """What is left of the scarcest RDT resource after ``plan``, 0..1.

    Only the resources the plan uses count: CLOSIDs when it needs a new
    control group, contiguous free ways on every cache domain it uses, RMIDs
    when it is monitored. A plan that uses none of them (an existing shared
    group, no monitoring) has headroom 1 everywhere.
    """
    capacity, caps = rdt.capacity, rdt.caps
    left = [1.0]
    if capacity.needs_closid(plan):
        left.append((capacity.free_closids - 1) /
                    max(caps.num_closids - 1, 1))
    for alloc in plan.caches:
        width = caps.caches[alloc.resource].cbm_width or 1
        for dom, ways, _size in alloc.domains:
            left.append((capacity.largest_free_run(alloc.resource, dom) -
                         ways) / width)
    if plan.monitor and capacity.free_rmids is not None:
        left.append((capacity.free_rmids - 1) / max(caps.num_rmids, 1))
    return max(min(left), 0.0)
