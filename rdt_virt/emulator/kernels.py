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

"""Kernel releases of the emulated host, as sets of behaviours.

Resctrl's user-visible behaviour changed from release to release, and
distributions backport fixes into old releases (Debian's 6.1.y has the
``bw_validate`` fix of 6.12), so a release here is not a version number
but the set of *features* it has. A kernel is named by a spec: a release,
then features added with ``+`` or removed with ``-``::

    6.1                 mainline 6.1 as released
    6.1+bw_validate     Debian 12's 6.1.y
    newest-mbm_assign   the newest release without counter assignment

Each feature names the mainline release and the commit that brought it
(see :data:`FEATURES`); a release has every feature whose release is not
newer than it. ``mkdir_clear_status`` belongs to no listed release: kernels
before 5.10 cleared ``last_cmd_status`` in every mkdir of a group, later
ones never do (only writes and rename clear it). Nor does
``status_on_access``, reported as queued for the release after 7.0 and
not in the mainline sources this table was checked against: a kernel
spec adds it with ``+status_on_access``.
"""

import collections
import re

Feature = collections.namedtuple('Feature', 'release commit summary')

#: Features in the order they reached mainline.
FEATURES = collections.OrderedDict([
    ('mkdir_clear_status', Feature(
        None, 'mkdir_rdt_prepare() before 5.10',
        'mkdir of a group clears last_cmd_status')),
    ('status_on_access', Feature(
        None, 'a change queued for the release after 7.0',
        'every access to a group file clears last_cmd_status under the '
        'kernel lock, so a reader between a failed write and its status '
        'finds "ok"')),
    ('assign_continue', Feature(
        None, 'reported for 7.0; not found in the sources checked',
        'an MBM event assigned to every domain (mkdir, "*=e") goes on past '
        'a domain without a free counter (6.18 stops there: '
        'rdtgroup_assign_cntr_event())')),
    ('mon_rename', Feature(
        '6.5', 'x86/resctrl: Implement rename op for mon groups',
        'a monitoring group can be renamed and moved to another control '
        'group (before: kernfs answers EPERM)')),
    ('bmec', Feature(
        '6.3', 'x86/resctrl: Add interface to read mbm_total_bytes_config',
        'info/L3_MON/mbm_total_bytes_config and mbm_local_bytes_config on '
        'hardware with BMEC (AMD), also listed in mon_features '
        '(rdt_mon_features_show)')),
    ('multi_tasks', Feature(
        '6.7', 'x86/resctrl: Add multiple tasks to the resctrl group at '
        'once', 'one tasks write takes a comma-separated list (before: one '
        'integer per write, a list is EINVAL with no status text)')),
    ('sparse_masks', Feature(
        '6.7', 'x86/resctrl: Enable non-contiguous CBMs in Intel CAT',
        'info/<cache>/sparse_masks exists')),
    ('rmid_after_closid', Feature(
        '6.9', 'x86/resctrl: Move RMID allocation out of '
        'mkdir_rdt_prepare()', 'control-group mkdir takes its CLOSID '
        'before its RMID (before: the RMID first, freed into limbo when '
        'no CLOSID is left)')),
    ('limbo_always', Feature(
        '6.9', 'x86/resctrl: Allow resctrl_arch_rmid_read() to sleep',
        'every freed RMID enters limbo (before: add_rmid_to_limbo() read '
        'the occupancy on the local domain and freed the RMID there at '
        'once when the read failed or was at most the threshold)')),
    ('snc', Feature(
        '6.11', 'x86/resctrl: Sub-NUMA Cluster (SNC) detection and '
        'enabling', 'with SNC, monitoring per node: mon_L3_XX sums its '
        'mon_sub_L3_YY directories; num_rmids per node')),
    ('bw_validate', Feature(
        '6.12', 'x86/resctrl: Avoid overflow in MB settings in '
        'bw_validate()', 'MB values parsed as u32; MBps values are not '
        'rounded to bandwidth_gran (before: rounded up like percents); '
        'backported to stable releases')),
    ('no_padding', Feature(
        '6.15', 'x86/resctrl: Remove data_width and the tabular format',
        'schemata values are not padded to a column width')),
    ('closid_bitmap', Feature(
        '6.16', 'x86/resctrl: Remove the limit on the number of CLOSID',
        'more than 32 CLOSIDs usable (before: at most 32 whatever '
        'num_closids says)')),
    ('mbm_assign', Feature(
        '6.18', 'x86,fs/resctrl: Support AMD Assignable Bandwidth '
        'Monitoring Counters (ABMC)', 'info/L3_MON/mbm_assign_mode; on '
        'hardware with assignable counters, mbm_event mode by default: '
        'num_mbm_cntrs counters per domain, Unassigned without one')),
    ('io_alloc', Feature(
        '6.19', 'fs/resctrl: Introduce interface to modify io_alloc '
        'capability', 'info/<cache>/io_alloc and io_alloc_cbm; enabling '
        'it takes the highest CLOSID (AMD SDCIAE)')),
    ('perf_pkg', Feature(
        '7.0', 'x86/resctrl: Enable RDT_RESOURCE_PERF_PKG (Intel '
        'Application Energy Telemetry, intel_aet.c)', 'on hardware with '
        'telemetry: info/PERF_PKG_MON, mon_data/mon_PERF_PKG_XX with '
        'core_energy/activity in fixed point; RMIDs are the minimum over '
        'the monitoring resources')),
    ('mpam', Feature(
        '7.1', 'arm_mpam: resctrl: Add boilerplate cpuhp and domain '
        'allocation (drivers/resctrl/mpam_resctrl.c)', 'Arm MPAM through '
        'resctrl: per-CLOSID RMID pools, CDP emulated with two PARTIDs, '
        'MB in percent rounded to MBW_MAX bands; without it an MPAM host '
        'has no resctrl')),
])

#: Releases offered by name, oldest first; ``newest`` is the last one.
RELEASES = ('5.14', '5.15', '6.1', '6.8',
            '6.12',
            '6.18', '7.0', '7.1')
NEWEST = RELEASES[-1]
#: Releases that the functional test matrix runs by default.
MATRIX_RELEASES = ('6.1', '6.8',
                   '6.12',
                   NEWEST)

_SPEC = re.compile(r'^([0-9]+\.[0-9]+|newest)((?:[+-][a-z0-9_]+)*)$')


class UnknownKernel(ValueError):
    """A kernel spec that names no release or an unknown feature."""


def _version(text):
    major, minor = text.split('.')
    return int(major), int(minor)


def release_features(release):
    """The features of mainline *release* (``'6.1'``...)."""
    version = _version(release)
    return frozenset(
        name for name, feat in FEATURES.items()
        if feat.release and _version(feat.release) <= version)


class Kernel(object):
    """A kernel: a release and the features it has.

    :ivar spec: the normalised spec, e.g. ``'6.1+bw_validate'``.
    :ivar release: the base release.
    :ivar features: frozenset of feature names.
    """

    def __init__(self, release, features, spec=None):
        self.release = release
        self.features = frozenset(features)
        self.spec = spec or release

    @property
    def osrelease(self):
        """What ``/proc/sys/kernel/osrelease`` reads on this kernel.

        The base release only: the agent takes the limits no resctrl file
        shows from it (:mod:`rdt_virt.resctrl.release`), as it would from a
        distribution kernel that backported a feature.
        """
        return '%s.0-rdt-virt-emulated' % self.release

    def has(self, feature):
        if feature not in FEATURES:
            raise KeyError('unknown kernel feature %r' % feature)
        return feature in self.features

    def __eq__(self, other):
        return (isinstance(other, Kernel) and
                self.features == other.features)

    def __hash__(self):
        return hash(self.features)

    def __repr__(self):
        return '<Kernel %s>' % self.spec


def get_kernel(spec=None):
    """The :class:`Kernel` a spec names (default: the newest release).

    :raises UnknownKernel: with the known releases and features.
    """
    if isinstance(spec, Kernel):
        return spec
    spec = (spec or NEWEST).strip()
    match = _SPEC.match(spec)
    release = match and match.group(1)
    if release == 'newest':
        release = NEWEST
    if not match or release not in RELEASES:
        raise UnknownKernel(
            'unknown kernel %r: give a release (%s or newest), then '
            '+feature or -feature' % (spec, ', '.join(RELEASES)))
    features = set(release_features(release))
    for sign, name in re.findall(r'([+-])([a-z0-9_]+)', match.group(2)):
        if name not in FEATURES:
            raise UnknownKernel('unknown kernel feature %r (known: %s)' % (
                name, ', '.join(FEATURES)))
        if sign == '+':
            features.add(name)
        else:
            features.discard(name)
    return Kernel(release, features, release + match.group(2))


def describe():
    """Rows ``(feature, release, commit, summary)`` for listings."""
    return [(name, feat.release or '-', feat.commit, feat.summary)
            for name, feat in FEATURES.items()]
