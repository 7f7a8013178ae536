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

"""Tiny KVM guests for the sandbox: noisy neighbours that are real.

A guest boots from a one-sector disk image whose 16-bit program, started by
SeaBIOS, never returns:

* ``burn`` fills 512 KiB of conventional memory (0x10000-0x8ffff) with
  ``rep stosw``, forever: its vCPU threads use all the CPU they get;
* ``idle`` halts, forever: its vCPU threads sleep.

Guests have no network and no other disk, 32 MiB of memory, a serial pty
and no balloon; they start in well under a second.
"""

import json
import os
import uuid as uuid_mod
from xml.sax import saxutils

# cli; xor ax,ax; mov ds,ax; cld
# outer: mov ax,0x1000
# seg:   mov es,ax; xor di,di; mov cx,0x8000; rep stosw
#        add ax,0x1000; cmp ax,0x9000; jb seg; jmp outer
BURN = bytes.fromhex('fa31c08ed8fc'
                     'b80010'
                     '8ec031ffb90080f3ab'
                     '0500103d0090'
                     '72ef'
                     'ebea')
# cli; hlt; jmp $-1 (back to hlt: an NMI must not wake it for good)
IDLE = bytes.fromhex('faf4ebfd')
PROGRAMS = {'burn': BURN, 'idle': IDLE}
IMAGE_SIZE = 1024 * 1024


def boot_sector(program):
    """A 512-byte MBR that runs ``program`` (``burn`` or ``idle``)."""
    code = PROGRAMS[program]
    return code + b'\0' * (510 - len(code)) + b'\x55\xaa'


def write_image(path, program='burn'):
    """Write a raw disk image that boots ``program``; return its path."""
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(boot_sector(program))
        f.truncate(IMAGE_SIZE)
    os.replace(tmp, path)
    return path


def domain_xml(name, image, vcpus=1, memory_mib=32, uuid=None,
               cputune='', metadata=''):
    """Domain XML of a tiny guest.

    :param image: a disk image made by :func:`write_image` (opened
        read-only, so one image serves every guest).
    :param cputune: XML inside ``<cputune>`` (cachetune, memorytune).
    :param metadata: XML inside ``<metadata>``.
    """
    esc = saxutils.escape
    return '''<domain type='kvm'>
  <name>{name}</name>
  <uuid>{uuid}</uuid>
  <metadata>{metadata}</metadata>
  <memory unit='MiB'>{memory}</memory>
  <vcpu placement='static'>{vcpus}</vcpu>
  <cputune>{cputune}</cputune>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <boot dev='hd'/>
    <bootmenu enable='no'/>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{image}'/>
      <target dev='vda' bus='virtio'/>
      <readonly/>
    </disk>
    <serial type='pty'/>
    <memballoon model='none'/>
  </devices>
</domain>
'''.format(name=esc(name), uuid=uuid or uuid_mod.uuid4(),
           metadata=metadata, memory=int(memory_mib), vcpus=int(vcpus),
           cputune=cputune, image=esc(image))


def program_started(dom):
    """True once the boot vCPU runs the guest's program.

    SeaBIOS spends a moment of CPU (about 1.5 s) before it loads the boot
    sector at 0x7c00; a test that measures the program must wait for it.
    """
    import libvirt_qemu

    hmp = libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP
    registers = libvirt_qemu.qemuMonitorCommand(dom, 'info registers', hmp)
    eip = int(registers.split('EIP=')[1].split()[0], 16)
    # "CS =0000 00000000 ...": selector, then the segment base.
    cs_base = int(registers.split('CS =')[1].split()[1], 16)
    return 0x7c00 <= cs_base + eip < 0x7e00


def vcpu_thread_ids(dom):
    """Thread ids of a running domain's vCPUs, by vCPU index.

    Asks QEMU itself (QMP ``query-cpus-fast``) rather than libvirt, so a
    test compares what libvirt wrote to resctrl with an independent source.
    """
    import libvirt_qemu

    reply = json.loads(libvirt_qemu.qemuMonitorCommand(
        dom, '{"execute": "query-cpus-fast"}', 0))
    return [cpu['thread-id'] for cpu in
            sorted(reply['return'], key=lambda c: c['cpu-index'])]
