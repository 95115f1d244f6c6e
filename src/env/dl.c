/* dl.c — loading libraries at run time and reading shared objects without loading them:
 * the ELF dynamic section (DT_NEEDED, RUNPATH), a string inside a file, and the dynamic
 * loader's cache (/etc/ld.so.cache). Also the version helpers of env.h. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "env.h"

/* ---------------------------------------------------------------- versions */

kc__ver kc__ver_parse(const char *t) {
    kc__ver v = kc__ver_none();
    if (!t) return v;
    while (*t == ' ' || *t == 'v' || *t == 'V') t++;
    if (!isdigit((unsigned char)*t)) return v;
    int part[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        long x = strtol(t, &end, 10);
        if (end == t) break;
        part[i] = (int)(x > 1000000 ? 1000000 : x);
        t = end;
        if (*t != '.' || !isdigit((unsigned char)t[1])) break;
        t++;
    }
    return (kc__ver){part[0], part[1], part[2]};
}

kc__ver kc__ver_from_cuda_int(long v) {
    if (v <= 0) return kc__ver_none();
    return (kc__ver){(int)(v / 1000), (int)((v % 1000) / 10), 0};
}

int kc__ver_cmp(kc__ver a, kc__ver b) {
    if (a.major != b.major) return a.major < b.major ? -1 : 1;
    if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
    if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
    return 0;
}

const char *kc__ver_str(kc__ver v, bool show_patch, char *buf, size_t n) {
    if (!kc__ver_known(v)) snprintf(buf, n, "?");
    else if (show_patch) snprintf(buf, n, "%d.%d.%d", v.major, v.minor, v.patch);
    else snprintf(buf, n, "%d.%d", v.major, v.minor);
    return buf;
}

/* ---------------------------------------------------------------- dlopen */

void *kc__dl_open(const char *name, char *err, size_t n) {
    dlerror();
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h && err && n) {
        const char *e = dlerror();
        snprintf(err, n, "%s", e ? e : "cannot be loaded");
    }
    return h;
}

void *kc__dl_loaded(const char *soname) { return dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD); }

void *kc__dl_sym(void *h, const char *name) {
    if (!h) return NULL;
    dlerror();
    return dlsym(h, name);
}

bool kc__dl_path(void *h, char *out, size_t n) {
    struct link_map *lm = NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !lm->l_name[0]) return false;
    char real[PATH_MAX];
    if (realpath(lm->l_name, real)) snprintf(out, n, "%s", real);
    else snprintf(out, n, "%s", lm->l_name);
    return true;
}

bool kc__pathf(char *out, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    return k >= 0 && (size_t)k < n;
}

bool kc__file_exists(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool kc__dir_exists(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---------------------------------------------------------------- files */

/* The whole file (at most max bytes) in malloc'd memory; NULL when unreadable. */
static unsigned char *slurp(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long size = ftell(f);
    if (size <= 0 || (size_t)size > max) {
        fclose(f);
        return NULL;
    }
    rewind(f);
    unsigned char *b = malloc((size_t)size + 1);
    if (b && fread(b, 1, (size_t)size, f) != (size_t)size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[size] = 0;
        *len = (size_t)size;
    }
    return b;
}

#define KC_ENV_MAX_SO ((size_t)1 << 30) /* read shared objects up to 1 GiB */

int kc__elf_dynamic(const char *path, char (*needed)[64], int max, char *runpath, size_t rn) {
    if (runpath && rn) runpath[0] = '\0';
    size_t size = 0;
    unsigned char *b = slurp(path, KC_ENV_MAX_SO, &size);
    if (!b) return -1;
    int count = -1;
    if (size < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64) goto done;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
        (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size - eh->e_shoff)
        goto done;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    count = 0;
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset || str->sh_offset > size ||
            str->sh_size > size - str->sh_offset)
            continue;
        const Elf64_Dyn *d = (const Elf64_Dyn *)(b + sh[i].sh_offset);
        size_t nd = sh[i].sh_size / sizeof(Elf64_Dyn);
        const char *strtab = (const char *)(b + str->sh_offset);
        for (size_t k = 0; k < nd && d[k].d_tag != DT_NULL; k++) {
            if (d[k].d_un.d_val >= str->sh_size) continue;
            const char *s = strtab + d[k].d_un.d_val;
            size_t room = str->sh_size - d[k].d_un.d_val;
            if (!memchr(s, 0, room)) continue;
            if (d[k].d_tag == DT_NEEDED && count < max && needed) snprintf(needed[count++], 64, "%s", s);
            else if ((d[k].d_tag == DT_RUNPATH || (d[k].d_tag == DT_RPATH && runpath && !runpath[0])) && runpath)
                snprintf(runpath, rn, "%s", s);
        }
    }
done:
    free(b);
    return count;
}

bool kc__file_find_string(const char *path, const char *prefix, char *out, size_t n) {
    size_t size = 0;
    unsigned char *b = slurp(path, KC_ENV_MAX_SO, &size);
    if (!b) return false;
    size_t plen = strlen(prefix);
    bool found = false;
    for (size_t i = 0; i + plen <= size && !found; i++) {
        if (b[i] != (unsigned char)prefix[0] || memcmp(b + i, prefix, plen) != 0) continue;
        if (i > 0 && b[i - 1] != 0) continue; /* the start of a string */
        const unsigned char *end = memchr(b + i, 0, size - i);
        size_t len = end ? (size_t)(end - (b + i)) : size - i;
        bool printable = true;
        for (size_t k = 0; k < len && printable; k++) printable = b[i + k] >= 0x20 && b[i + k] < 0x7f;
        if (!printable || len > 1024) continue;
        snprintf(out, n, "%.*s", (int)len, (const char *)(b + i));
        found = true;
    }
    free(b);
    return found;
}

/* ---------------------------------------------------------------- ld.so.cache
 * The new format ("glibc-ld.so.cache1.1"), optionally after the old one ("ld.so-1.7.0"):
 *   header: magic[17] version[3] u32 nlibs, u32 len_strings, u8 flags, u8 pad[3],
 *           u32 extension_offset, u32 unused[3]                       (48 bytes)
 *   entries: i32 flags, u32 key, u32 value, u32 osversion, u64 hwcap  (24 bytes each)
 * key and value are offsets of strings from the start of the new header. */

#define KC_LDC_FLAG_ELF_LIBC6 0x0003
#define KC_LDC_FLAG_X8664 0x0300
#define KC_LDC_FLAG_AARCH64 0x0a00
#define KC_LDC_ARCH_MASK 0xff00

int kc__ldcache_find(const char *soname, char (*paths)[KC_ENV_PATH], int max) {
    size_t size = 0;
    unsigned char *b = slurp("/etc/ld.so.cache", (size_t)64 << 20, &size);
    if (!b) return 0;
    size_t off = 0;
    static const char old_magic[] = "ld.so-1.7.0";
    static const char new_magic[] = "glibc-ld.so.cache1.1";
    if (size >= 16 && memcmp(b, old_magic, sizeof old_magic - 1) == 0) {
        uint32_t nold;
        memcpy(&nold, b + 12, 4);
        off = 16 + (size_t)nold * 12;
        off = (off + 7) & ~(size_t)7;
    }
    int found = 0;
    if (off + 48 > size || memcmp(b + off, new_magic, sizeof new_magic - 1) != 0) goto done;
    uint32_t nlibs;
    memcpy(&nlibs, b + off + 20, 4);
    const unsigned char *base = b + off;
    size_t avail = size - off;
    if ((uint64_t)nlibs * 24 > avail - 48) goto done;
#if defined(__x86_64__)
    const int want_arch = KC_LDC_FLAG_X8664;
#elif defined(__aarch64__)
    const int want_arch = KC_LDC_FLAG_AARCH64;
#else
    const int want_arch = -1;
#endif
    for (uint32_t i = 0; i < nlibs && found < max; i++) {
        const unsigned char *e = base + 48 + (size_t)i * 24;
        int32_t flags;
        uint32_t key, value;
        memcpy(&flags, e, 4);
        memcpy(&key, e + 4, 4);
        memcpy(&value, e + 8, 4);
        if (want_arch >= 0 && (flags & KC_LDC_ARCH_MASK) != want_arch) continue;
        if (key >= avail || value >= avail) continue;
        const char *k = (const char *)(base + key), *v = (const char *)(base + value);
        if (!memchr(k, 0, avail - key) || !memchr(v, 0, avail - value)) continue;
        if (strcmp(k, soname) != 0) continue;
        bool dup = false;
        for (int j = 0; j < found && !dup; j++) dup = strcmp(paths[j], v) == 0;
        if (!dup) snprintf(paths[found++], KC_ENV_PATH, "%s", v);
    }
done:
    free(b);
    return found;
}
