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

"""The domains Nova owns, from libvirt, with their events.

:class:`LibvirtSource` keeps one read-only connection to libvirtd (the
agent never changes a domain) and turns lifecycle, metadata and device
events into :class:`Event` objects on a queue that the agent's loop drains
(the fast path). A domain's XML is parsed once and
cached until an event says it changed, its domain id changes (it was
restarted) or ``[rdt_agent] domain_refresh_interval`` passes, so a tick
costs one ``listAllDomains`` call rather than one XML per domain.

libvirt delivers events from its own event loop, which needs a real OS
thread (``virEventRunDefaultImpl`` blocks in C) registered before the first
connection; :func:`rdt_virt.concurrency.native` keeps it one even under
eventlet. When libvirtd goes away (restart, crash) the close callback marks
the source disconnected; the agent reconnects and runs a full
reconciliation, since events may have been missed meanwhile.
"""

import collections
import time

from oslo_log import log as logging

from rdt_virt.agent import desired
from rdt_virt import concurrency
from rdt_virt import exception

LOG = logging.getLogger(__name__)

Event = collections.namedtuple('Event', ['kind', 'uuid', 'time'])
Event.__doc__ = """A domain event: ``kind`` is one of :data:`STARTED`,
:data:`STOPPED`, :data:`CHANGED` or :data:`RECONNECTED` (uuid None);
``time`` is when it arrived (monotonic)."""

STARTED = 'started'
STOPPED = 'stopped'
CHANGED = 'changed'
RECONNECTED = 'reconnected'


# Created at import, before anyone could patch threading: a real lock.
_loop_lock = concurrency.native('threading').Lock()
_loop_started = False


def _start_event_loop(libvirt):
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()
        # Errors are raised as exceptions; do not also print them.
        libvirt.registerErrorHandler(lambda ctx, err: None, None)

        def run():
            while True:
                libvirt.virEventRunDefaultImpl()

        concurrency.native('threading').Thread(
            target=run, name='libvirt-events', daemon=True).start()
        _loop_started = True


class LibvirtSource(object):
    """Running Nova domains of one libvirtd as agent Instances.

    :param uri: libvirt URI (``[rdt_agent] libvirt_uri``).
    :param default_monitor: ``[rdt] monitoring``.
    :param refresh_interval: seconds a cached domain XML stays valid.
    """

    def __init__(self, uri, default_monitor=True, refresh_interval=300.0,
                 clock=time.monotonic):
        self.uri = uri
        self.default_monitor = default_monitor
        self.refresh_interval = refresh_interval
        self.clock = clock
        self.events = concurrency.native('queue').Queue()
        self._conn = None
        self._lock = concurrency.native('threading').Lock()
        # uuid -> (domain id, fetched at, Instance or None)
        self._cache = {}

    # Connection ------------------------------------------------------------

    @property
    def connected(self):
        return self._conn is not None

    def connect(self):
        """Open the connection and subscribe to events; raise on failure."""
        import libvirt

        _start_event_loop(libvirt)
        # The agent only reads domains and receives their events: a
        # read-only connection needs no membership of the libvirt group
        # (root-equivalent), only the world-accessible read-only socket.
        conn = libvirt.openReadOnly(self.uri)
        try:
            conn.registerCloseCallback(self._on_close, None)
            conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                self._on_lifecycle, None)
            for name in ('VIR_DOMAIN_EVENT_ID_METADATA_CHANGE',
                         'VIR_DOMAIN_EVENT_ID_DEVICE_ADDED',
                         'VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED'):
                conn.domainEventRegisterAny(
                    None, getattr(libvirt, name), self._on_change, None)
        except libvirt.libvirtError:
            conn.close()
            raise
        try:
            # Notice a dead libvirtd within seconds even when idle.
            conn.setKeepAlive(5, 3)
        except libvirt.libvirtError:
            pass  # local drivers (test:///) have no keepalive
        with self._lock:
            self._conn = conn
            self._cache.clear()
        LOG.info('Connected to libvirt at %s', self.uri)

    def disconnect(self):
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # already dead
                pass

    def _on_close(self, conn, reason, opaque):
        LOG.warning('Lost the libvirt connection to %s (reason %s)',
                    self.uri, reason)
        with self._lock:
            if self._conn is conn:
                self._conn = None

    def _lost(self):
        # Called when a call fails because libvirtd went away.
        with self._lock:
            self._conn = None

    # Events ------------------------------------------------------------------

    def _on_lifecycle(self, conn, dom, event, detail, opaque):
        import libvirt

        uuid = dom.UUIDString()
        now = self.clock()
        if event == libvirt.VIR_DOMAIN_EVENT_STARTED:
            # Also sent for restores and incoming migrations. A resume
            # follows every start and brings no new thread: not an event
            # for the agent.
            kind = STARTED
        elif event in (libvirt.VIR_DOMAIN_EVENT_STOPPED,
                       libvirt.VIR_DOMAIN_EVENT_UNDEFINED,
                       libvirt.VIR_DOMAIN_EVENT_CRASHED):
            kind = STOPPED
        else:
            return
        self.invalidate(uuid)
        self.events.put(Event(kind, uuid, now))

    def _on_change(self, conn, dom, *args):
        uuid = dom.UUIDString()
        self.invalidate(uuid)
        self.events.put(Event(CHANGED, uuid, self.clock()))

    def invalidate(self, uuid=None):
        """Forget cached XML of ``uuid`` (None: every domain)."""
        with self._lock:
            if uuid is None:
                self._cache.clear()
            else:
                self._cache.pop(uuid, None)

    # Domains -----------------------------------------------------------------

    def _parse(self, dom):
        try:
            return desired.parse(dom.XMLDesc(0), self.default_monitor)
        except exception.InvalidXML as e:
            LOG.warning('Ignoring domain %s: %s', dom.UUIDString(), e)
            return None

    def _get(self, dom, now):
        uuid = dom.UUIDString()
        dom_id = dom.ID()
        cached = self._cache.get(uuid)
        if cached and cached[0] == dom_id and (
                now - cached[1] < self.refresh_interval):
            return cached[2]
        inst = self._parse(dom)
        self._cache[uuid] = (dom_id, now, inst)
        return inst

    def capabilities(self):
        """libvirt's host capabilities XML (the agent's topology source).

        :raises: libvirt.libvirtError, or RDTVirtException when not
            connected.
        """
        conn = self._conn
        if conn is None:
            raise exception.RDTVirtException('not connected to libvirt')
        return conn.getCapabilities()

    def instances(self):
        """``{uuid: Instance}`` of the running domains Nova owns.

        :raises: libvirt.libvirtError when libvirtd cannot be reached (the
            source is then disconnected).
        """
        import libvirt

        conn = self._conn
        if conn is None:
            raise exception.RDTVirtException('not connected to libvirt')
        now = self.clock()
        try:
            doms = conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
        except libvirt.libvirtError:
            self._lost()
            raise
        found = {}
        seen = set()
        for dom in doms:
            seen.add(dom.UUIDString())
            try:
                inst = self._get(dom, now)
            except libvirt.libvirtError as e:
                # It stopped between the listing and the XML.
                LOG.debug('Domain vanished while reading it: %s', e)
                continue
            if inst is not None:
                found[inst.uuid] = inst
        with self._lock:
            for uuid in list(self._cache):
                if uuid not in seen:
                    del self._cache[uuid]
        return found

    def instance(self, uuid):
        """The Instance of one running domain, read now, or None."""
        import libvirt

        conn = self._conn
        if conn is None:
            return None
        try:
            dom = conn.lookupByUUIDString(uuid)
            # The lookup brings the domain's id, -1 while it is not
            # running: no second call to libvirtd (isActive()).
            if dom.ID() < 0:
                return None
            inst = self._parse(dom)
        except libvirt.libvirtError:
            return None
        self._cache[uuid] = (dom.ID(), self.clock(), inst)
        return inst
