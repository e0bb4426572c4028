/* SPDX-License-Identifier: MIT */
#ifndef AQL_LDS_H
#define AQL_LDS_H
#endif
