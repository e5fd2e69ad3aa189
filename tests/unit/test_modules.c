#include "unit.h"

#include <stdlib.h>
#include <unistd.h>

#include "err.h"
#include "modules.h"

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
}

static void make_tree(void)
{
    snprintf(dir, sizeof(dir), "/tmp/hearth-mod.XXXXXX");
    if (!mkdtemp(dir))
        dir[0] = 0;
    write_file("modules.dep",
               "kernel/drivers/virtio/virtio.ko:\n"
               "kernel/drivers/virtio/virtio_ring.ko:\n"
               "kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko "
               "kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko\n"
               "kernel/fs/9p/9p.ko.xz: kernel/net/9p/9pnet.ko.xz kernel/fs/netfs/netfs.ko.xz\n"
               "kernel/net/netfilter/nf-tables.ko: kernel/lib/libcrc32c.ko\n"
               "/abs/extra/thing.ko:\n");
    write_file("modules.builtin", "kernel/drivers/char/virtio_console.ko\n");
}

static void drop_tree(void)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/modules.dep", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/modules.builtin", dir);
    unlink(p);
    rmdir(dir);
}

TEST(modules_resolve_order_and_names)
{
    char paths[8][256], want[300];
    struct err err = {0};
    make_tree();

    /* Dependencies come right to left, the module itself last. */
    CHECK_EQ_INT(modules_resolve(dir, "virtio_pci", paths, 8, &err), 4);
    snprintf(want, sizeof(want), "%s/kernel/drivers/virtio/virtio.ko", dir);
    CHECK_STR(paths[0], want);
    snprintf(want, sizeof(want), "%s/kernel/drivers/virtio/virtio_ring.ko", dir);
    CHECK_STR(paths[1], want);
    snprintf(want, sizeof(want), "%s/kernel/drivers/virtio/virtio_pci_modern_dev.ko", dir);
    CHECK_STR(paths[2], want);
    snprintf(want, sizeof(want), "%s/kernel/drivers/virtio/virtio_pci.ko", dir);
    CHECK_STR(paths[3], want);

    /* A module with no dependencies; a compressed file name. */
    CHECK_EQ_INT(modules_resolve(dir, "virtio", paths, 8, &err), 1);
    CHECK_EQ_INT(modules_resolve(dir, "9p", paths, 8, &err), 3);
    snprintf(want, sizeof(want), "%s/kernel/fs/9p/9p.ko.xz", dir);
    CHECK_STR(paths[2], want);
    /* "9pnet" must not match "9p", nor "virtio" match "virtio_ring". */
    CHECK_EQ_INT(modules_resolve(dir, "9pnet", paths, 8, &err), -1);

    /* '-' and '_' are one character. */
    CHECK_EQ_INT(modules_resolve(dir, "nf_tables", paths, 8, &err), 2);
    CHECK_EQ_INT(modules_resolve(dir, "nf-tables", paths, 8, &err), 2);

    /* Absolute paths in modules.dep are kept as they are. */
    CHECK_EQ_INT(modules_resolve(dir, "thing", paths, 8, &err), 1);
    CHECK_STR(paths[0], "/abs/extra/thing.ko");

    /* Built in: nothing to load. */
    CHECK_EQ_INT(modules_resolve(dir, "virtio_console", paths, 8, &err), 0);

    err.msg[0] = 0;
    CHECK_EQ_INT(modules_resolve(dir, "nosuch", paths, 8, &err), -1);
    CHECK_CONTAINS(err.msg, "not found");

    /* More dependencies than room: an error, never a partial list. */
    CHECK_EQ_INT(modules_resolve(dir, "virtio_pci", paths, 3, &err), -1);
    CHECK_CONTAINS(err.msg, "dependencies");
    drop_tree();
}

TEST(modules_resolve_missing_dir)
{
    char paths[2][256];
    struct err err = {0};
    CHECK_EQ_INT(modules_resolve("/nonexistent/hearth", "virtio", paths, 2, &err), -1);
    CHECK_CONTAINS(err.msg, "not found");
}
