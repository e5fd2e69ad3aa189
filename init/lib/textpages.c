#include "textpages.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "err.h"

/* Where the linker put the first byte of the image (its first PT_LOAD). */
extern const char __executable_start[];

int textpages_release(struct err *e)
{
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
    size_t n = getauxval(AT_PHNUM);
    uintptr_t page = (uintptr_t)getauxval(AT_PAGESZ);
    uintptr_t bias = 0, start = 0, end = 0;
    int first = 1;

    if (!ph || n == 0)
        return err_unable(e, ENOENT, "find the program headers");
    /* The executable segment (code, and with -z noseparate-code the
     * read-only data beside it), never written: its pages can always be
     * read back from the file. The first PT_LOAD gives the load bias (0
     * for a fixed-address binary). */
    for (size_t i = 0; i < n; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        if (first) {
            bias = (uintptr_t)__executable_start - (ph[i].p_vaddr & ~(page - 1));
            first = 0;
        }
        if ((ph[i].p_flags & (PF_X | PF_W)) == PF_X) {
            start = (bias + ph[i].p_vaddr) & ~(page - 1);
            end = (bias + ph[i].p_vaddr + ph[i].p_memsz + page - 1) & ~(page - 1);
            break;
        }
    }
    if (end <= start)
        return err_unable(e, ENOENT, "find the code segment");
    if (madvise((void *)start, end - start, MADV_DONTNEED) != 0)
        return err_unable(e, errno, "release the code pages");
    return 0;
}
