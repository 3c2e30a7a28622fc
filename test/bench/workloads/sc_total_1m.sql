SELECT sc_total('ranked');
