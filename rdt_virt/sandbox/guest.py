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

A guest boots from a one-sector disk image whose program, started by
SeaBIOS, never returns:

* ``burn`` fills 512 KiB of conventional memory (0x10000-0x8ffff) with
  ``rep stosw``, forever: its vCPU threads use all the CPU they get;
* ``idle`` halts, forever: its vCPU threads sleep;
* ``work`` switches to 32-bit protected mode, writes 16 MiB of memory
  (1-17 MiB) over and over and reports its own progress: it writes the line
  :data:`WORK_BANNER` to the first serial port, then one ``.`` for every
  :data:`WORK_UNIT_BYTES` it has written. A guest with its
  serial port on a file (``domain_xml(serial_file=...)``) thus keeps a
  count of its work that the host reads with :class:`WorkMeter`: the
  stand-in for a benchmark's own figure (requests or bytes per second).

Guests have no network and no other disk, 32 MiB of memory, a serial port
(a pty, or a file) and no balloon; they start in well under a second.
"""

import json
import os
import time
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
# Source of WORK (GNU as; 16-bit until protected mode, loaded at 0x7c00).
# It runs in 32-bit protected mode (flat segments), where KVM executes it
# natively also when real mode would be emulated, and walks 16 MiB.
#   .code16
#        cli; xor ax,ax; mov ds,ax; lgdt [gdtdesc]
#        mov eax,cr0; or eax,1; mov cr0,eax; ljmp 0x08:pm
#   .code32
# pm:    mov ax,0x10; mov ds,ax; mov es,ax; mov ss,ax; cld
#        mov dx,0x3f8; mov esi,banner
# print: lodsb; test al,al; jz walk; out dx,al; jmp print
# walk:  mov edi,0x100000                   ; 1 MiB .. 17 MiB
# chunk: mov ecx,0x10000; rep stosd          ; 256 KiB
#        mov al,'.'; out dx,al
#        cmp edi,0x1100000; jb chunk; jmp walk
# gdt:   null; code 0x00cf9a000000ffff; data 0x00cf92000000ffff
# banner: .asciz "\r\nrdt-virt work\r\n"
WORK = bytes.fromhex(
    'fa31c08ed8660f0116707c0f20c06683c8010f22c066ea1d7c0000080066b81000'
    '8ed88ec08ed0fc66baf803be767c0000ac84c07403eeebf8bf00001000b9000001'
    '00f3abb02eee81ff0000100172eeebe78db6000000000000000000000000ffff00'
    '00009acf00ffff00000092cf001700587c00000d0a7264742d7669727420776f72'
    '6b0d0a00')
WORK_BANNER = 'rdt-virt work'
#: Bytes of guest memory written per ``.`` of a ``work`` guest.
WORK_UNIT_BYTES = 0x10000 * 4
PROGRAMS = {'burn': BURN, 'idle': IDLE, 'work': WORK}
IMAGE_SIZE = 1024 * 1024


# One partition table entry: the rest of the disk (LBA 1 on), type 0xda
# ("non-filesystem data"). Glance and Nova inspect every image they store or
# boot: a sector with the MBR signature is a disk with a partition table to
# them, and one with no partition fails their safety check (Glance answers
# the upload with HTTP 415, Nova refuses the image).
PARTITION_ENTRY = bytes.fromhex('00' '000200' 'da' 'feffff') + (
    (1).to_bytes(4, 'little') +
    (IMAGE_SIZE // 512 - 1).to_bytes(4, 'little'))
PARTITION_TABLE = 446


def boot_sector(program):
    """A 512-byte MBR that runs ``program`` (``burn`` or ``idle``)."""
    code = PROGRAMS[program]
    return (code + b'\0' * (PARTITION_TABLE - len(code)) + PARTITION_ENTRY +
            b'\0' * 48 + b'\x55\xaa')


def write_image(path, program='burn'):
    """Write a raw disk image that boots ``program``; return its path."""
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(boot_sector(program))
        f.truncate(IMAGE_SIZE)
    os.replace(tmp, path)
    return path


def domain_xml(name, image, vcpus=1, memory_mib=32, uuid=None,
               cputune='', metadata='', serial_file=None):
    """Domain XML of a tiny guest.

    :param image: a disk image made by :func:`write_image` (opened
        read-only, so one image serves every guest).
    :param cputune: XML inside ``<cputune>`` (cachetune, memorytune).
    :param metadata: XML inside ``<metadata>``.
    :param serial_file: a file that gets the first serial port's output
        (default: a pty).
    """
    esc = saxutils.escape
    if serial_file:
        serial = ("<serial type='file'><source path=%s/></serial>" %
                  saxutils.quoteattr(serial_file))
    else:
        serial = "<serial type='pty'/>"
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
    {serial}
    <memballoon model='none'/>
  </devices>
</domain>
'''.format(name=esc(name), uuid=uuid or uuid_mod.uuid4(),
           metadata=metadata, memory=int(memory_mib), vcpus=int(vcpus),
           cputune=cputune, image=esc(image), serial=serial)


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


def work_units(text):
    """Units of work a ``work`` guest reported in its serial output *text*.

    Only dots after the banner count: the firmware may print before it.
    """
    start = text.rfind(WORK_BANNER)
    if start < 0:
        return None
    return text.count('.', start + len(WORK_BANNER))


class WorkMeter(object):
    """Reads the progress of a ``work`` guest from its serial file.

    :meth:`sample` gives ``(monotonic time, units)``; :func:`work_rate`
    turns two samples into bytes per second. The file only grows, so each
    read starts where the last one ended.
    """

    def __init__(self, path, clock=time.monotonic):
        self.path = path
        self.clock = clock
        self._text = ''
        self._offset = 0

    def sample(self):
        """``(time, units)``; units is None until the banner appears."""
        now = self.clock()
        try:
            with open(self.path, 'rb') as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            data = b''
        self._offset += len(data)
        self._text += data.decode('ascii', 'replace')
        # Keep only what counting still needs: the banner and the dots.
        start = self._text.rfind(WORK_BANNER)
        if start > 0:
            self._text = self._text[start:]
        return now, work_units(self._text)


def work_rate(first, second):
    """Bytes per second between two :meth:`WorkMeter.sample` results."""
    (t0, u0), (t1, u1) = first, second
    if u0 is None or u1 is None or t1 <= t0:
        return None
    return (u1 - u0) * WORK_UNIT_BYTES / (t1 - t0)
