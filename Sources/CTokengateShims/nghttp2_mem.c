//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
// tokengate: the per-session allocator handed to nghttp2 (see CTokengateShims_nghttp2.h).

#include "CTokengateShims_nghttp2.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/// One block with pages of its own.
typedef struct {
    void *address;
    size_t size;   // what nghttp2 asked for
    size_t mapped; // the length of the mapping (whole pages)
} tokengate_mapped_block;

/// The most mapped blocks an arena may hold at once. A sealed session's arena holds one (its frame buffer);
/// the bound only matters for an arena used unsealed, and past it large blocks come from malloc like the rest.
#define TOKENGATE_MAPPED_BLOCKS_MAX 8

/// nghttp2 1.52's outbound frame buffer: a frame header, one byte of padding length and a 16 KiB payload
/// (NGHTTP2_FRAMEBUF_CHUNKLEN, internal to the library). Only a session whose creation mapped exactly one block
/// of this size releases pages when idle: the argument that nothing in it is needed between frames is about
/// the frame buffer, and a future libnghttp2 that allocated something else that large must not have it zeroed.
#define TOKENGATE_NGHTTP2_FRAMEBUF_SIZE (9 + 1 + 16384)

/// Mappings held by all arenas of the process, and their cap. The kernel merges adjacent anonymous mappings,
/// but munmaps in between split them again, so in the worst case each is a mapping of its own, and the kernel
/// limits mappings per process (vm.max_map_count, 65,530 by default) — a limit malloc itself needs headroom
/// under (its thread arenas and large blocks are mappings too). Past the cap, sessions' frame buffers come from
/// malloc like everything else: more resident memory per idle connection, nothing else changes. The default
/// `limits.max_connections` (10,000) stays well under it.
#define TOKENGATE_MAPPED_TOTAL_MAX 16384
static atomic_size_t tokengate_mapped_total = 0;

struct CTokengateShims_nghttp2_arena {
    /// Handed to nghttp2_session_server_new3, which copies it; `mem_user_data` points back here.
    nghttp2_mem mem;
    /// Set by CTokengateShims_nghttp2_arena_seal: no new mappings from then on.
    int sealed;
    /// Set by CTokengateShims_nghttp2_arena_seal when what was mapped is exactly the frame buffer.
    int releasable;
    size_t count;
    tokengate_mapped_block blocks[TOKENGATE_MAPPED_BLOCKS_MAX];
};

static size_t tokengate_page_size(void) {
    long page = sysconf(_SC_PAGESIZE);
    return page > 0 ? (size_t)page : 4096;
}

/// The index of `pointer` among the arena's mapped blocks, or -1 (it came from malloc).
static long tokengate_find(const CTokengateShims_nghttp2_arena *arena, const void *pointer) {
    for (size_t i = 0; i < arena->count; i++) {
        if (arena->blocks[i].address == pointer) {
            return (long)i;
        }
    }
    return -1;
}

/// A fresh mapping for `size` bytes, recorded in the arena; NULL when the arena is sealed or full or mmap fails
/// (the caller then falls back to malloc). Fresh anonymous pages read as zero, so calloc needs no memset — which
/// would touch, and so commit, every page.
static void *tokengate_map(CTokengateShims_nghttp2_arena *arena, size_t size) {
    const size_t page = tokengate_page_size();
    // With pages larger than 4 KiB (arm64 kernels with 16 or 64 KiB pages) one small frame commits as much as
    // malloc would have: no gain, so no mapping.
    if (page > 4096 || arena->sealed || arena->count == TOKENGATE_MAPPED_BLOCKS_MAX || size > SIZE_MAX / 2) {
        return NULL;
    }
    if (atomic_fetch_add_explicit(&tokengate_mapped_total, 1, memory_order_relaxed) >= TOKENGATE_MAPPED_TOTAL_MAX) {
        atomic_fetch_sub_explicit(&tokengate_mapped_total, 1, memory_order_relaxed);
        return NULL;
    }
    const size_t mapped = (size + page - 1) & ~(page - 1);
    void *address = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (address == MAP_FAILED) {
        atomic_fetch_sub_explicit(&tokengate_mapped_total, 1, memory_order_relaxed);
        return NULL;
    }
    // Adjacent mappings merge; with transparent huge pages on `always`, a merged region would be backed by
    // 2 MiB pages and every frame buffer in it would be resident whole — more than malloc's 16 KiB.
    (void)madvise(address, mapped, MADV_NOHUGEPAGE);
    arena->blocks[arena->count] = (tokengate_mapped_block){.address = address, .size = size, .mapped = mapped};
    arena->count += 1;
    return address;
}

static void tokengate_unmap(CTokengateShims_nghttp2_arena *arena, size_t index) {
    if (munmap(arena->blocks[index].address, arena->blocks[index].mapped) != 0) {
        // Only possible when splitting a merged region needs a mapping the kernel will not give (ENOMEM): the
        // pages at least go back, the address range stays reserved.
        (void)madvise(arena->blocks[index].address, arena->blocks[index].mapped, MADV_DONTNEED);
    }
    atomic_fetch_sub_explicit(&tokengate_mapped_total, 1, memory_order_relaxed);
    arena->count -= 1;
    arena->blocks[index] = arena->blocks[arena->count];
}

static void *tokengate_arena_malloc(size_t size, void *mem_user_data) {
    CTokengateShims_nghttp2_arena *arena = mem_user_data;
    if (size >= CTokengateShims_NGHTTP2_MAPPED_BLOCK_MIN) {
        void *address = tokengate_map(arena, size);
        if (address != NULL) {
            return address;
        }
    }
    return malloc(size);
}

static void tokengate_arena_free(void *pointer, void *mem_user_data) {
    CTokengateShims_nghttp2_arena *arena = mem_user_data;
    if (pointer == NULL) {
        return;
    }
    long index = tokengate_find(arena, pointer);
    if (index >= 0) {
        tokengate_unmap(arena, (size_t)index);
    } else {
        free(pointer);
    }
}

static void *tokengate_arena_calloc(size_t count, size_t size, void *mem_user_data) {
    CTokengateShims_nghttp2_arena *arena = mem_user_data;
    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    if (count * size >= CTokengateShims_NGHTTP2_MAPPED_BLOCK_MIN) {
        void *address = tokengate_map(arena, count * size);
        if (address != NULL) {
            return address;
        }
    }
    return calloc(count, size);
}

static void *tokengate_arena_realloc(void *pointer, size_t size, void *mem_user_data) {
    CTokengateShims_nghttp2_arena *arena = mem_user_data;
    if (pointer == NULL) {
        return tokengate_arena_malloc(size, mem_user_data);
    }
    long index = tokengate_find(arena, pointer);
    if (index < 0 && (arena->sealed || size < CTokengateShims_NGHTTP2_MAPPED_BLOCK_MIN)) {
        return realloc(pointer, size);
    }
    // A mapped block changing size, or a malloc'd block growing past the threshold: a new block and a copy.
    // A malloc'd block's size is not recorded; its usable size is at least what was asked for, and readable.
    size_t old = index >= 0 ? arena->blocks[index].size : malloc_usable_size(pointer);
    void *fresh = tokengate_arena_malloc(size, mem_user_data);
    if (fresh == NULL) {
        return NULL; // the old block stays valid, as realloc's contract says
    }
    memcpy(fresh, pointer, old < size ? old : size);
    tokengate_arena_free(pointer, mem_user_data);
    return fresh;
}

CTokengateShims_nghttp2_arena *CTokengateShims_nghttp2_arena_new(void) {
    CTokengateShims_nghttp2_arena *arena = calloc(1, sizeof(CTokengateShims_nghttp2_arena));
    if (arena == NULL) {
        return NULL;
    }
    arena->mem = (nghttp2_mem){
        .mem_user_data = arena,
        .malloc = tokengate_arena_malloc,
        .free = tokengate_arena_free,
        .calloc = tokengate_arena_calloc,
        .realloc = tokengate_arena_realloc,
    };
    return arena;
}

void CTokengateShims_nghttp2_arena_seal(CTokengateShims_nghttp2_arena *arena) {
    arena->sealed = 1;
    arena->releasable = arena->count == 1 && arena->blocks[0].size == TOKENGATE_NGHTTP2_FRAMEBUF_SIZE;
}

int CTokengateShims_nghttp2_arena_is_releasable(const CTokengateShims_nghttp2_arena *arena) {
    return arena->releasable;
}

nghttp2_mem *CTokengateShims_nghttp2_arena_mem(CTokengateShims_nghttp2_arena *arena) {
    return &arena->mem;
}

size_t CTokengateShims_nghttp2_arena_release_pages(CTokengateShims_nghttp2_arena *arena) {
    if (arena->sealed && !arena->releasable) {
        return 0;
    }
    size_t released = 0;
    for (size_t i = 0; i < arena->count; i++) {
        if (madvise(arena->blocks[i].address, arena->blocks[i].mapped, MADV_DONTNEED) == 0) {
            released += arena->blocks[i].mapped;
        }
    }
    return released;
}

size_t CTokengateShims_nghttp2_arena_resident_bytes(const CTokengateShims_nghttp2_arena *arena) {
    const size_t page = tokengate_page_size();
    size_t resident = 0;
    for (size_t i = 0; i < arena->count; i++) {
        unsigned char vector[64];
        const size_t pages = arena->blocks[i].mapped / page;
        if (pages > sizeof(vector) || mincore(arena->blocks[i].address, arena->blocks[i].mapped, vector) != 0) {
            resident += arena->blocks[i].mapped; // cannot tell: count it all
            continue;
        }
        for (size_t p = 0; p < pages; p++) {
            resident += (vector[p] & 1) ? page : 0;
        }
    }
    return resident;
}

size_t CTokengateShims_nghttp2_arena_mapped_count(const CTokengateShims_nghttp2_arena *arena) {
    return arena->count;
}

void CTokengateShims_nghttp2_arena_free(CTokengateShims_nghttp2_arena *arena) {
    if (arena == NULL) {
        return;
    }
    while (arena->count > 0) {
        tokengate_unmap(arena, arena->count - 1);
    }
    free(arena);
}
