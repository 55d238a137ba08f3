module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<1xf32>) -> tensor<4611686018427387904xf32> {
    %0 = "kiln.broadcast_to"(%arg0) {shape = #kiln.shape<[4611686018427387904]>} : (tensor<1xf32>) -> tensor<4611686018427387904xf32>
    return %0 : tensor<4611686018427387904xf32>
  }
}
