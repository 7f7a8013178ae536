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

"""Throttled instances a reference host admits: per-instance vs shared.

The reference host has 8 MB CLOSIDs; the default group holds one.

* Per-instance strategy: every throttled instance is a libvirt domain with
  ``<memorytune>``, so libvirt makes one control group (one CLOSID) each.
  Guests are started on a sandbox (real libvirtd and KVM) until libvirt
  refuses one; without the sandbox's prerequisites, libvirt's mkdir of a
  group per instance is replayed on the emulator instead.
* Shared strategy: instances throttled to seven different percentages
  (10-70%) are placed by rdt-virt-agent into seven shared groups; every
  one of them is checked to sit in a throttled group. Fake QEMUs on the
  emulator (real threads), so that hundreds of instances fit a test
  machine; ``--real-shared N`` adds N real guests on the sandbox too.

Prints both counts and their ratio (target at least 25x). Needs root and
/dev/fuse (and /dev/kvm plus libvirt for the real guests).

Run::

    python benchmarks/agent_admission.py [--shared 200] [--real-shared 0] \\
        [--per-instance-limit 64]
"""

import argparse
import errno
import os
import shutil
import tempfile

from agent_common import EmulatedHost  # noqa: I100
from agent_common import shared

from rdt_virt.resctrl import fs
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import launcher

#: What the shared strategy is held to (doc/source/contributor/
#: benchmarks.rst).
ADMISSION_TARGET = 25.0
ADMISSION_TARGET_TEXT = ('throttled instances admitted, shared / '
                         'per-instance >= 25x on the reference host')
CACHE_DIR = '/var/tmp/rdt-virt-tests/libvirt-cache'
NOVA = ('<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/'
        '1.1"><nova:name>bench</nova:name></nova:instance>')
#: What the last main() counted, for the benchmark's own tests:
#: {'per_instance': what :func:`per_instance_real` (or
#: :func:`per_instance_emulated`) returned, with 'how'; 'shared':
#: {'admitted', 'tried', 'groups'}; 'ratio'}.
LAST_RUN = {}


def num_closids(root):
    """CLOSIDs of the host, as the kernel counts them (info/*)."""
    return fs.Resctrl(root).capabilities().kernel_closids


def libvirt_groups(root):
    """The control groups libvirt made, one per throttled domain."""
    return sorted(n for n in os.listdir(root) if n.startswith('qemu-'))


def per_instance_real(limit=64):
    """Guests with <memorytune> until libvirt refuses one.

    Returns ``{'admitted', 'refusal' (libvirt's message), 'errno' (of the
    refusal, None when it was no system error), 'closids' (the host's),
    'groups' (libvirt's, before the refusal)}``.
    """
    import libvirt

    libvirt.registerErrorHandler(lambda ctx, err: None, None)

    base = tempfile.mkdtemp(prefix='rdtsb-', dir='/tmp')
    sb = launcher.Sandbox(base, 'reference', CACHE_DIR)
    sb.start()
    try:
        conn = libvirt.open(sb.uri)
        image = guest.write_image(os.path.join(base, 'idle.img'), 'idle')
        tune = ("<memorytune vcpus='0'><node id='0' bandwidth='10'/>"
                "<node id='1' bandwidth='10'/></memorytune>")
        started = 0
        refusal = code = None
        for i in range(limit):
            try:
                conn.createXML(guest.domain_xml(
                    'pi-%d' % i, image, metadata=NOVA, cputune=tune))
            except libvirt.libvirtError as e:
                refusal = str(e)
                if e.get_error_code() == libvirt.VIR_ERR_SYSTEM_ERROR:
                    code = e.get_int1()     # virReportSystemError's errno
                break
            started += 1
        return dict(admitted=started, refusal=refusal, errno=code,
                    closids=num_closids(sb.resctrl_root),
                    groups=libvirt_groups(sb.resctrl_root))
    finally:
        sb.stop()
        shutil.rmtree(base, ignore_errors=True)


def per_instance_emulated(env, limit=64):
    """libvirt's one mkdir per throttled instance, replayed.

    Returns what :func:`per_instance_real` does.
    """
    made = 0
    refusal = code = None
    for i in range(limit):
        path = os.path.join(env.mount, 'qemu-%d-pi-%d-vcpus_0' % (i, i))
        try:
            os.mkdir(path)
        except OSError as e:
            refusal, code = str(e), e.errno
            break
        made += 1
    return dict(admitted=made, refusal=refusal, errno=code,
                closids=num_closids(env.mount),
                groups=libvirt_groups(env.mount))


def shared_emulated(env, count):
    uuids = [env.boot(shared(10 * (i % 7 + 1)), vcpus=2)
             for i in range(count)]
    env.agent.tick()
    admitted = 0
    for uuid in uuids:
        place = env.agent.placements[uuid]
        group = place.group
        if group is None:
            continue
        with open(os.path.join(env.mount, group, 'schemata')) as f:
            throttled = 'MB:0=100' not in f.read().replace(' ', '')
        with open(os.path.join(env.mount, group, 'tasks')) as f:
            tasks = {int(t) for t in f.read().split()}
        if throttled and env.host.vcpu_tids(uuid) <= tasks:
            admitted += 1
    return admitted, len([n for n in os.listdir(env.mount)
                          if n.startswith('rdtvirt-mb')])


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument('--shared', type=int, default=200)
    parser.add_argument('--real-shared', type=int, default=0)
    parser.add_argument('--per-instance-limit', type=int, default=64,
                        help='start at most this many per-instance guests '
                        '(the reference host refuses the eighth)')
    args = parser.parse_args(argv)
    LAST_RUN.clear()

    if not launcher.missing_prerequisites():
        found = per_instance_real(args.per_instance_limit)
        how = 'real libvirtd + KVM guests with <memorytune>'
    else:
        env = EmulatedHost()
        try:
            found = per_instance_emulated(env, args.per_instance_limit)
        finally:
            env.close()
        how = "libvirt's mkdir per instance replayed on the emulator"
    found['how'] = how
    LAST_RUN['per_instance'] = found
    per = found['admitted']
    print('per-instance strategy: %d throttled instances admitted (%s); '
          'the next one: %s' % (per, how, found['refusal']))
    if found['errno'] != errno.ENOSPC:
        print('the per-instance count did not end at the CLOSIDs running '
              'out (ENOSPC): it is no admission limit')

    env = EmulatedHost()
    try:
        admitted, groups = shared_emulated(env, args.shared)
    finally:
        env.close()
    LAST_RUN['shared'] = dict(admitted=admitted, tried=args.shared,
                              groups=groups)
    print('shared strategy: %d of %d throttled instances admitted and '
          'placed, in %d shared groups (7 percentages), fake QEMUs on the '
          'emulator' % (admitted, args.shared, groups))
    if args.real_shared:
        real = shared_real(args.real_shared)
        print('shared strategy with real guests: %d of %d placed' % (
            real, args.real_shared))
    ratio = admitted / float(per) if per else float('inf')
    LAST_RUN['ratio'] = ratio
    print('ratio shared / per-instance: %.1fx (the shared count is bounded '
          'only by the %d instances tried)' % (ratio, args.shared))
    ok = ratio >= ADMISSION_TARGET and found['errno'] == errno.ENOSPC
    print('target: %s: %s (ratio to target %.3f)' % (
        ADMISSION_TARGET_TEXT, 'met' if ok else 'NOT met',
        ratio / ADMISSION_TARGET))
    return 0 if ok else 1


def shared_real(count):
    """``count`` real guests in shared groups, placed by the agent."""
    import libvirt

    from agent_common import CONF
    from rdt_virt.cmd import agent as agent_cmd
    from rdt_virt import privsep

    base = tempfile.mkdtemp(prefix='rdtsb-', dir='/tmp')
    sb = launcher.Sandbox(base, 'reference', CACHE_DIR)
    sb.start()
    try:
        CONF.set_override('resctrl_root', sb.resctrl_root, 'rdt')
        for name, value in dict(
                libvirt_uri=sb.uri, proc_root='/proc',
                qemu_pid_dir=os.path.join(sb.paths.private('/run/libvirt'),
                                          'qemu')).items():
            CONF.set_override(name, value, 'rdt_agent')
        privsep.sys_admin_pctxt.set_client_mode(False)
        agent = agent_cmd.build_agent(CONF)
        conn = libvirt.open(sb.uri)
        image = guest.write_image(os.path.join(base, 'idle.img'), 'idle')
        meta = ('<rdtvirt:rdt xmlns:rdtvirt="http://openstack.org/xmlns/'
                'libvirt/rdt-virt/1.0" version="1"><rdtvirt:membw '
                'unit="percent" value="%d" group="shared"/></rdtvirt:rdt>')
        doms = [conn.createXML(guest.domain_xml(
            'sh-%d' % i, image, metadata=NOVA + meta % (10 * (i % 7 + 1))))
            for i in range(count)]
        agent.tick()
        placed = 0
        for dom in doms:
            group = 'rdtvirt-mb%d' % (10 * (doms.index(dom) % 7 + 1))
            with open(os.path.join(sb.resctrl_root, group, 'tasks')) as f:
                tasks = {int(t) for t in f.read().split()}
            if set(guest.vcpu_thread_ids(dom)) <= tasks:
                placed += 1
        return placed
    finally:
        sb.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == '__main__':
    raise SystemExit(main())
