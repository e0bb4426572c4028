/* SPDX-License-Identifier: MIT */
/* Being written. */
typedef int aql_placeholder_;
