/* logs.h — private to src/io: what the training-log writers (csv_logger.c, tensorboard.c)
 * share. */
#ifndef KC_IO_LOGS_H
#define KC_IO_LOGS_H

#include <stddef.h>
#include <stdint.h>

/* A double as Python's repr writes it: the fewest digits (15 to 17) that read back as the
 * same value; "nan", "inf", "-inf". */
void kc__fmt_shortest(char *buf, size_t n, double v);

/* CRC-32C (Castagnoli) of n bytes, and TFRecord's masked form of it. */
uint32_t kc__crc32c(const void *data, size_t n);
uint32_t kc__crc32c_masked(const void *data, size_t n);

#endif /* KC_IO_LOGS_H */
