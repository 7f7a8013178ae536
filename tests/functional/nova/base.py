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

"""Nova's in-process harness with RDT-aware computes.

Each compute runs ``RDTLibvirtDriver`` (loaded as Nova loads it, through
``compute_driver = rdtvirt.RDTLibvirtDriver``) over fakelibvirt, with:

* host capabilities that carry the ``<cache>`` banks and
  ``<memory_bandwidth>`` nodes of its hardware variant;
* its own copy of a resctrl fixture tree (``tests/fixtures/resctrl``) as
  ``[rdt] resctrl_root``, which tests can fill up with groups;
* a record of every domain XML the driver defined.

The scheduler runs RDTFilter and RDTWeigher next to Nova's defaults, against
the real placement service; the API runs at the latest microversion.
"""

import gc
import os
import re
import shutil
import signal
import sys
import traceback
import urllib.parse
import warnings

import fixtures
from nova import context as nova_context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base
import nova.virt
from sqlalchemy import exc as sqla_exc

from nova_plugin import conf as plugin_conf
from nova_plugin.scheduler import state as sched_state
from rdt_virt.policy import hoststats
from tests import base as tests_base
from tests.functional.nova import fakeresctrl

CONF = plugin_conf.CONF
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
RESCTRL_FIXTURES = os.path.join(tests_base.FIXTURES_DIR, 'resctrl')

MIB = 1024 * 1024


def _dump_stacks(signum, frame):
    """Write every thread's and green thread's stack, for a hung worker.

    ``kill -USR1 <stestr worker>`` writes /tmp/rdt-virt-stacks-<pid>.txt:
    under eventlet py-spy shows only the idle hub, not who waits on what.
    """
    import greenlet
    with open('/tmp/rdt-virt-stacks-%d.txt' % os.getpid(), 'w') as f:
        for ident, top in sys._current_frames().items():
            f.write('=== thread %s\n' % ident)
            f.write(''.join(traceback.format_stack(top)))
        for obj in gc.get_objects():
            if isinstance(obj, greenlet.greenlet) and obj.gr_frame:
                f.write('=== green thread %r\n' % obj)
                f.write(''.join(traceback.format_stack(obj.gr_frame)))


signal.signal(signal.SIGUSR1, _dump_stacks)

# libvirt's view of each fixture variant's caches and memory bandwidth
# nodes, on the fake host's 8 CPUs (two NUMA nodes of 4).
_L3 = '''<bank id='%(id)d' level='3' type='both' size='36608' unit='KiB'
 cpus='%(cpus)s'>%(controls)s</bank>'''
_L3_CONTROL = ('''<control granularity='3328' unit='KiB' type='%s' '''
               '''maxAllocs='%d'/>''')
_MONITOR = '''<monitor level='3' reuseThreshold='270336' maxMonitors='192'>
<feature name='llc_occupancy'/><feature name='mbm_total_bytes'/>
<feature name='mbm_local_bytes'/></monitor>'''
_MB = '''<memory_bandwidth>
<node id='0' cpus='0-3'><control granularity='10' min='10' maxAllocs='8'/>
</node><node id='1' cpus='4-7'><control granularity='10' min='10'
 maxAllocs='8'/></node></memory_bandwidth>'''


def _caches(controls, monitor=True):
    banks = ''.join(_L3 % {'id': i, 'cpus': cpus, 'controls': controls}
                    for i, cpus in ((0, '0-3'), (1, '4-7')))
    return '<cache>%s%s</cache>' % (banks, _MONITOR if monitor else '')


# A host with one L3 cache and one memory bandwidth node, id 0, for all 8
# CPUs (a fixture tree with domain 1 removed: one_socket()).
ONE_SOCKET_XML = (
    '<cache>' + (_L3 % {'id': 0, 'cpus': '0-7',
                        'controls': _L3_CONTROL % ('both', 16)}) +
    _MONITOR + '</cache>' + '''<memory_bandwidth>
<node id='0' cpus='0-7'><control granularity='10' min='10' maxAllocs='8'/>
</node></memory_bandwidth>''')

HOST_RDT_XML = {
    'reference': _caches(_L3_CONTROL % ('both', 16)) + _MB,
    'cdp': _caches(_L3_CONTROL % ('code', 8) + _L3_CONTROL % ('data', 8)) +
    _MB,
    'mba-mbps': _caches(_L3_CONTROL % ('both', 16)) + _MB,
    'l3-cat': _caches(_L3_CONTROL % ('both', 16), monitor=False),
    'none': '',
}


# Bytes of one whole L3 cache (36608 KiB) for each scope libvirt knows.
CACHE_SIZES = {res: 36608 * 1024 for res in ('L3', 'L3CODE', 'L3DATA')}


class RDTConnection(fakeresctrl.ResctrlConnectionMixin,
                    fakelibvirt.Connection):
    """fakelibvirt with RDT host capabilities and a record of domains.

    Its domains make and remove resctrl groups in ``rdt_root`` as libvirt
    does (:mod:`tests.functional.nova.fakeresctrl`).
    """

    rdt_cache_sizes = CACHE_SIZES

    def __init__(self, *args, rdt_xml='', rdt_root=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.rdt_xml = rdt_xml
        self.rdt_root = rdt_root
        # Domain name -> every XML defined for it, latest last.
        self.defined = {}

    def getCapabilities(self):
        caps = super().getCapabilities()
        if not self.rdt_xml:
            return caps
        head, sep, tail = caps.partition('</host>')
        return head + self.rdt_xml + sep + tail

    def _record(self, xml):
        dom = fakelibvirt.Domain(connection=self, xml=xml)
        self.defined.setdefault(dom.name(), []).append(xml)

    def defineXML(self, xml):
        self._record(xml)
        return super().defineXML(xml)

    def createXML(self, xml, flags):
        self._record(xml)
        return super().createXML(xml, flags)


class RDTServersTestBase(base.ServersTestBase):
    """Computes with RDTLibvirtDriver and a scheduler with RDT plugins."""

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        # The repository's loader, for a checkout installed with
        # "pip install -e" (no "rdt-virt-nova-loader install" there); an
        # installed loader comes first on the path.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.__path__',
            list(nova.virt.__path__) + [os.path.join(REPO, 'nova', 'virt')]))
        self._rdt_variants = {}
        self._rdt_xmls = {}
        self._rdt_flags = {}
        self.roots = {}
        # The scheduler's estimates of each node, by host name: the next
        # test reuses the names.
        sched_state._views.clear()
        self.addCleanup(sched_state._views.clear)
        super().setUp()
        # Nova 34 turns SQLAlchemy deprecations in nova into errors, and
        # SQLAlchemy 2.1 deprecated noload(), which Nova uses to load an
        # instance with its fault: unrelated to rdt-virt, so not an error
        # here (Nova's test base resets the filters after each test).
        warnings.filterwarnings(
            'ignore', message=r'The noload\(\) option is deprecated',
            category=sqla_exc.SADeprecationWarning)
        # As Nova's own libvirt functional tests: there are no disks to
        # move between the fake hosts. The source still powers off, which
        # stops the domain and so removes its resctrl groups.
        def migrate_disk_and_power_off(driver, context, instance, *args,
                                       **kwargs):
            driver.power_off(instance)
            return '{}'

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver'
            '.migrate_disk_and_power_off', migrate_disk_and_power_off))

    def _setup_services(self):
        # Nova's test config points at its source tree's api-paste.ini; an
        # installed Nova has it under the prefix.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        super()._setup_services()

    def _setup_compute_service(self):
        self.flags(compute_driver='rdtvirt.RDTLibvirtDriver')

    def _setup_scheduler_service(self):
        self.flags(
            available_filters=[
                'nova.scheduler.filters.all_filters',
                'nova_plugin.scheduler.filters.RDTFilter'],
            enabled_filters=list(CONF.filter_scheduler.enabled_filters) + [
                'RDTFilter'],
            weight_classes=[
                'nova_plugin.scheduler.weights.RDTWeigher'],
            group='filter_scheduler')
        return self.start_service('scheduler')

    def _get_connection(self, host_info=None, pci_info=None, mdev_info=None,
                        vdpa_info=None, libvirt_version=None,
                        qemu_version=None, hostname=None):
        conn = super()._get_connection(host_info, pci_info, mdev_info,
                                       vdpa_info, libvirt_version,
                                       qemu_version, hostname)
        rdt = RDTConnection(
            'qemu:///system', version=conn.fakeLibVersion,
            hv_version=conn.fakeVersion, host_info=conn.host_info,
            pci_info=conn.pci_info, mdev_info=conn.mdev_info,
            vdpa_info=conn.vdpa_info, hostname=conn.hostname,
            rdt_xml=self._rdt_xmls.get(hostname) or HOST_RDT_XML[
                self._rdt_variants.get(hostname, 'none')],
            rdt_root=self.roots.get(hostname))
        return rdt

    def start_rdt_compute(self, hostname, variant='reference',
                          strategy='per-instance', monitoring=True,
                          prepare=None, rdt_xml=None):
        """Start compute ``hostname`` on a copy of resctrl ``variant``.

        :param prepare: called with the copied tree's path before the
            compute starts (to add groups, for example).
        :param rdt_xml: libvirt's caches and memory bandwidth nodes, if
            not those of ``variant``.
        """
        root = self.useFixture(fixtures.TempDir()).path
        tree = os.path.join(root, 'resctrl')
        shutil.copytree(os.path.join(RESCTRL_FIXTURES, variant), tree)
        # The trees hold libvirt groups of domains "instance-0000000N",
        # which are also the names of this test's first instances.
        for name in os.listdir(tree):
            if name.startswith('qemu-'):
                os.rename(os.path.join(tree, name), os.path.join(
                    tree, name.replace('-instance-', '-fixture-')))
        if prepare is not None:
            prepare(tree)
        self.roots[hostname] = tree
        self._rdt_variants[hostname] = variant
        self._rdt_xmls[hostname] = rdt_xml
        # The driver reads [rdt] when it starts; computes share CONF.
        self._rdt_flags[hostname] = dict(
            resctrl_root=tree, mb_strategy=strategy, monitoring=monitoring,
            state_file=os.path.join(root, 'state.json'))
        self.flags(group='rdt', **self._rdt_flags[hostname])
        return self.start_compute(hostname)

    def restart_rdt_compute(self, hostname):
        """Restart nova-compute on ``hostname``; its domains stay."""
        self.flags(group='rdt', **self._rdt_flags[hostname])
        return self.restart_compute_service(hostname,
                                            keep_hypervisor_state=True)

    def live_migrate_to(self, server, host):
        """Live-migrate ``server`` to ``host`` and wait until it is ACTIVE.

        Nova 31's harness ``_live_migrate`` cannot name the host (it came
        with Nova 32), so the action is posted here, as the API gets it.
        """
        self.api.post_server_action(server['id'], {'os-migrateLive': {
            'host': host, 'block_migration': 'auto'}})
        self._wait_for_migration_status(server, ['completed'])
        return self._wait_for_state_change(server, 'ACTIVE')

    def live_migrations_complete(self, fail=False):
        """Live migrations through fakelibvirt end as libvirt ends them.

        As Nova's own libvirt tests (LibvirtMigrationMixin): the
        destination's libvirt starts the domain from the XML the source
        sent, which makes its resctrl groups or fails; on success the
        source's domain goes away (VIR_MIGRATE_UNDEFINE_SOURCE), with its
        groups. With ``fail``, the job fails before the switch-over and
        the destination keeps nothing.
        """
        test = self

        def migrate(domain, destination, params, flags):
            xml = params['destination_xml']
            test.migrated_xmls.append(xml)
            if fail:
                domain.fail_job()
                return
            dest = urllib.parse.urlparse(destination).hostname
            conn = test.driver(dest)._host.get_connection()
            try:
                conn.createXML(xml, 0)
            except fakelibvirt.libvirtError:
                domain.fail_job()
                raise
            source = domain._connection
            source._mark_not_running(domain)
            if source._vms.get(domain.name()) is domain:
                source._undefine(domain)
            domain.complete_job()

        self.migrated_xmls = []
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', migrate))

    def live_migrations_raise(self):
        """Live migrations through fakelibvirt fail as libvirt fails them.

        fakelibvirt's ``migrateToURI3`` raises, as libvirt does when the
        migration fails, but up to Nova 33 its domains report a migration
        job running until a test ends it: Nova's monitor then polls for
        ever, and stopping the compute at the test's end waits for it.
        Here the job ends (failed) before the call raises, as in libvirt.
        """
        def migrate(domain, destination, params, flags):
            domain.fail_job()
            raise fakelibvirt.make_libvirtError(
                fakelibvirt.libvirtError,
                'Migration always fails for fake libvirt!',
                error_code=fakelibvirt.VIR_ERR_INTERNAL_ERROR,
                error_domain=fakelibvirt.VIR_FROM_QEMU)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3', migrate))

    def allow_rescue(self):
        """Rescue works on the fake hosts.

        As Nova's own rescue test with fakelibvirt
        (test_rescue_deleted_base): the instance directory, where the
        driver writes unrescue.xml, is the instances path, and the rescue
        image's access time is not touched.
        """
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.utils.get_instance_path',
            lambda *args, **kwargs: CONF.instances_path))
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.imagebackend._update_utime_ignore_eacces'))

    # Helpers -----------------------------------------------------------

    def driver(self, hostname):
        return self.computes[hostname].driver

    def domain_xmls(self, server, hostname=None):
        """Every domain XML defined for ``server`` (latest last)."""
        hostname = hostname or server['OS-EXT-SRV-ATTR:host']
        conn = self.driver(hostname)._host.get_connection()
        name = server['OS-EXT-SRV-ATTR:instance_name']
        return conn.defined.get(name, [])

    def domain_xml(self, server, hostname=None):
        """The latest domain XML the driver defined for ``server``."""
        xmls = self.domain_xmls(server, hostname)
        self.assertTrue(xmls, 'no domain XML for %s' % server['id'])
        return xmls[-1]

    def claims(self, hostname):
        """{instance uuid: plan} held by ``hostname``'s driver."""
        return {c.uuid: c.plan
                for c in self.driver(hostname)._rdt_claims.all()}

    def reported(self, hostname):
        """The RDT state ``hostname`` last reported to the scheduler."""
        node = objects.ComputeNode.get_by_nodename(
            nova_context.get_admin_context(), hostname)
        return hoststats.decode(node.stats)

    def free_closids(self, hostname):
        """Free CLOSIDs ``hostname`` reports after a resource update."""
        self._run_periodics()
        return self.reported(hostname).capacity.free_closids

    def failed_builds(self, hostname):
        """Builds ``hostname`` counted as failed (BuildFailureWeigher)."""
        rt = self.computes[hostname].manager.rt
        return int(rt.stats[hostname].get('failed_builds', 0))

    def libvirt_groups(self, hostname):
        """The resctrl groups libvirt made on ``hostname`` (sorted).

        Not those of the tree (their domains are ``fixture-0000000N``).
        """
        return sorted(n for n in os.listdir(self.roots[hostname])
                      if n.startswith('qemu-') and '-fixture-' not in n)

    def flavor(self, extra_specs, vcpu=2, memory_mb=1024):
        return self._create_flavor(vcpu=vcpu, memory_mb=memory_mb, disk=1,
                                   ephemeral=0, extra_spec=extra_specs)

    def boot(self, flavor_id, expected_state='ACTIVE', **kwargs):
        return self._create_server(flavor_id=flavor_id, networks='none',
                                   expected_state=expected_state, **kwargs)


# The reference tree has 4 free CLOSIDs (8 MB CLOSIDs, the default group
# and three groups).
FREE = 4


def leave_closids(free):
    """A ``prepare`` that leaves ``free`` CLOSIDs in a reference tree."""
    return lambda tree: add_groups(tree, FREE - free)


def one_socket(tree):
    """A ``prepare`` that leaves one cache and memory bandwidth domain.

    Removes domain 1 from every schemata, size and monitoring directory of
    a fixture tree: a host like ONE_SOCKET_XML.
    """
    for path, dirs, files in os.walk(tree):
        for fname in ('schemata', 'size'):
            if fname not in files:
                continue
            name = os.path.join(path, fname)
            with open(name) as f:
                text = f.read()
            with open(name, 'w') as f:
                f.write(re.sub(r';1=[^;\n]*', '', text))
        for name in list(dirs):
            if name.startswith('mon_') and name.endswith('_01'):
                shutil.rmtree(os.path.join(path, name))
                dirs.remove(name)


def add_groups(tree, count, schemata=None):
    """Add ``count`` control groups that rdt-virt does not own."""
    if schemata is None:
        with open(os.path.join(tree, 'schemata')) as f:
            schemata = f.read()
    taken = set(os.listdir(tree))
    names = (n for n in ('other-%d' % i for i in range(1000))
             if n not in taken)
    for _ in range(count):
        group = os.path.join(tree, next(names))
        os.mkdir(group)
        os.mkdir(os.path.join(group, 'mon_groups'))
        with open(os.path.join(group, 'schemata'), 'w') as f:
            f.write(schemata)
