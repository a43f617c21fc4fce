/* placeholder: the analysis module fills this in */
