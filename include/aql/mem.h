/* SPDX-License-Identifier: MIT */
#ifndef AQL_MEM_H
#define AQL_MEM_H
#endif
